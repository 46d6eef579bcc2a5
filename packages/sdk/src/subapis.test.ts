import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  UmsClient as Client,
  ConflictError,
  NotFoundError,
  StreamError,
  TimeoutError,
  type UmsClient,
  UmsError,
  Unit,
  ValidationError,
} from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

// The sub-APIs against a real ums server with real units: `box`, and `fork` made from a checkpoint
// of it (two units: the machine is small).

/** A small HTTP server run by the unit's node (bind-mounted at /.unit/bin/node). */
const nodeHttp = (port: number, body: string) => ({
  cmd: "/.unit/bin/node",
  args: [
    "-e",
    `console.log("listening");require("http").createServer((q,r)=>r.end(${JSON.stringify(body)}+q.url)).listen(${port})`,
  ],
});

describe("Unit sub-APIs against a real ums server", () => {
  let server: LaunchedServer;
  let client: UmsClient;
  let box: Unit;

  before(async () => {
    server = await launchServer();
    client = new Client({ baseUrl: server.baseUrl, token: await server.token("subapis"), timeoutMs: 60_000 });
    box = await Unit.create("box", { client });
  });
  after(async () => {
    await server?.stop();
  });

  describe("commands", () => {
    it("run returns stdout, stderr and a non-zero exit code as a result", async () => {
      const r = await box.commands.run(["sh", "-c", "echo out; echo err >&2; exit 3"]);
      assert.deepEqual(r, { stdout: "out\n", stderr: "err\n", exitCode: 3 });
    });

    it("a string is a bash script; env, cwd and stdin reach the process", async () => {
      const r = await box.commands.run('echo "$FOO"; pwd; cat', { env: { FOO: "b a r" }, cwd: "/tmp", stdin: "in" });
      assert.equal(r.stdout, "b a r\n/tmp\nin");
      assert.equal(r.exitCode, 0);
    });

    it("streams output to onStdout/onStderr; large output arrives whole and in order", async () => {
      const pieces: string[] = [];
      const errs: string[] = [];
      const r = await box.commands.run(["sh", "-c", "seq 1 60000; echo done >&2"], {
        onStdout: (d) => pieces.push(d),
        onStderr: (d) => errs.push(d),
      });
      const expected = `${Array.from({ length: 60000 }, (_, i) => i + 1).join("\n")}\n`;
      assert.equal(r.stdout.length, expected.length);
      assert.equal(r.stdout, expected);
      assert.equal(pieces.join(""), expected);
      assert.ok(pieces.length > 1, "output came in pieces");
      assert.equal(errs.join(""), "done\n");
    });

    it("timeoutMs ends a command that runs too long with TimeoutError, and the process with it", async () => {
      const t0 = Date.now();
      await assert.rejects(box.commands.run(["sleep", "30.123"], { timeoutMs: 1500 }), TimeoutError);
      assert.ok(Date.now() - t0 < 10_000);
      // Processes whose command line is exactly `sleep 30.123`, from /proc; the control proves the count works.
      const count =
        "sleep 0.5; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -cx 'sleep 30.123 '";
      const after = await box.commands.run(["sh", "-c", `${count}; true`]);
      assert.equal(after.stdout.trim(), "0", `the process ended with the connection: ${after.stderr}`);
      const control = await box.commands.run(["sh", "-c", `sleep 30.123 & ${count}; kill $!`]);
      assert.equal(control.stdout.trim(), "1", control.stderr);
    });

    it("an aborted signal ends the run with the signal's reason", async () => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(new Error("stopped by the caller")), 300);
      await assert.rejects(box.commands.run(["sleep", "5"], { signal: ac.signal }), /stopped by the caller/);
    });

    it("a command that cannot start, a bad env and an unknown unit are errors", async () => {
      const r = await box.commands.run(["/no/such/program"]);
      assert.notEqual(r.exitCode, 0);
      await assert.rejects(box.commands.run(["true"], { env: { "BAD-NAME": "x" } }), ValidationError);
      const ghost = await Unit.create("ghost", { client });
      await ghost.delete();
      await assert.rejects(ghost.commands.run(["true"]), NotFoundError);
    });
  });

  describe("files", () => {
    it("write then read back every byte value, as bytes and as a stream", async () => {
      const bytes = new Uint8Array(256 * 64).map((_, i) => i % 256);
      const w = await box.files.write("data/all.bin", bytes, { mkdirParents: true, mode: 0o600 });
      assert.deepEqual(w, { path: "/home/unit/data/all.bin", size: bytes.length, mode: "0600" });
      assert.deepEqual(await box.files.read("/home/unit/data/all.bin", { format: "bytes" }), bytes);
      const stream = await box.files.read("data/all.bin", { format: "stream" });
      const parts: Uint8Array[] = [];
      for await (const p of stream) parts.push(p);
      assert.deepEqual(new Uint8Array(Buffer.concat(parts)), bytes);
    });

    it("writes text and streams; the command sees what the file API wrote", async () => {
      await box.files.write("hello.txt", "héllo\n");
      assert.equal(await box.files.read("hello.txt"), "héllo\n");
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode("one,"));
          c.enqueue(new TextEncoder().encode("two"));
          c.close();
        },
      });
      assert.equal((await box.files.write("streamed.txt", body)).size, 7);
      assert.equal((await box.commands.run(["cat", "/home/unit/streamed.txt"])).stdout, "one,two");
    });

    it("list, rename, remove, makeDir and exists", async () => {
      assert.equal(await box.files.makeDir("tree/a/b"), true);
      assert.equal(await box.files.makeDir("tree/a/b"), false);
      await box.files.write("tree/a/f.txt", "f");
      const entries = await box.files.list("tree/a");
      assert.deepEqual(entries.map((e) => [e.name, e.type, e.isDir]).sort(), [
        ["b", "directory", true],
        ["f.txt", "file", false],
      ]);
      await box.files.rename("tree/a/f.txt", "tree/g.txt");
      assert.equal(await box.files.read("/home/unit/tree/g.txt"), "f");
      assert.equal(await box.files.exists("tree/a/f.txt"), false);
      await assert.rejects(box.files.remove("tree"), (err: unknown) => err instanceof ValidationError);
      assert.ok((await box.files.remove("tree", { recursive: true })).includes("/home/unit/tree"));
      assert.equal(await box.files.exists("tree"), false);
      await box.files.write("plain", "x");
      await assert.rejects(box.files.makeDir("plain/sub"), ValidationError);
    });

    it("a missing file is NotFoundError with the errno code and the path", async () => {
      await assert.rejects(box.files.read("nope/missing.txt"), (err: unknown) => {
        assert.ok(err instanceof NotFoundError, String(err));
        assert.equal(err.status, 404);
        assert.equal(err.code, "ENOENT");
        assert.equal(err.path, "/home/unit/nope/missing.txt");
        return true;
      });
      await assert.rejects(box.files.write("/etc/passwd", "x"), (err: unknown) => {
        assert.ok(err instanceof ValidationError, String(err));
        assert.equal(err.code, "EACCES");
        return true;
      });
      await box.files.write("/etc/sdk-root.txt", "by root", { user: "root" });
      assert.equal(await box.files.read("/etc/sdk-root.txt"), "by root");
      assert.equal((await box.commands.run(["stat", "-c", "%U", "/etc/sdk-root.txt"])).stdout.trim(), "root");
    });
  });

  describe("services", () => {
    it("a service put through the SDK runs and answers through the unit's URL", async () => {
      const put = await box.services.put("web", { ...nodeHttp(8080, "hi from web"), http_port: 8080 });
      assert.equal(put.name, "web");
      assert.equal(put.http_port, 8080);
      let text = "";
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const res = await fetch(`${server.baseUrl}/v1/units/box/hello`, {
          headers: { authorization: `Bearer ${client.config.token}` },
        });
        text = await res.text();
        if (res.status === 200) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(text, "hi from web/hello");
      // The supervisor says running once its poll of the port sees it listen, which may come just
      // after the proxy first reached it.
      let got = await box.services.get("web");
      for (let i = 0; i < 50 && got.state?.status !== "running"; i++) {
        await new Promise((r) => setTimeout(r, 200));
        got = await box.services.get("web");
      }
      assert.equal(got.state?.status, "running");
      assert.ok((await box.services.list()).some((s) => s.name === "web"));
      const logs = await box.services.logs("web", { lines: 10 });
      assert.ok(
        logs.some((e) => e.type === "stdout" && e.data === "listening"),
        JSON.stringify(logs),
      );
      assert.equal(logs.at(-1)?.type, "complete");
    });

    it("restart streams stopping, stopped, started and complete; stop and start", async () => {
      const seen: string[] = [];
      const events = await box.services.restart("web", { durationMs: 500, onEvent: (e) => seen.push(e.type) });
      assert.deepEqual(
        events.map((e) => e.type),
        seen,
      );
      const types = seen.filter((t) => t === "stopping" || t === "stopped" || t === "started" || t === "complete");
      assert.deepEqual(types, ["stopping", "stopped", "started", "complete"], JSON.stringify(events));
      await box.services.stop("web");
      assert.equal((await box.services.get("web")).state?.status, "stopped");
      await box.services.start("web", { durationMs: 0 });
      assert.notEqual((await box.services.get("web")).state?.status, "stopped");
    });

    it("a service that cannot start throws StreamError; bad and unknown services are errors", async () => {
      await box.services.put("broken", { cmd: "/no/such/binary" });
      await assert.rejects(box.services.restart("broken", { durationMs: 1000 }), (err: unknown) => {
        assert.ok(err instanceof StreamError, String(err));
        assert.match(err.message, /no\/such\/binary/);
        assert.equal(err.event?.type, "error");
        return true;
      });
      await box.services.remove("broken");
      await assert.rejects(box.services.get("broken"), (err: unknown) => {
        assert.ok(err instanceof NotFoundError, String(err));
        assert.equal(err.code, "UMS_SERVICE_NOT_FOUND");
        return true;
      });
      await assert.rejects(box.services.put("x", { cmd: "sleep", needs: ["ghost"] }), ValidationError);
      await assert.rejects(box.services.put("web2", { cmd: "sleep", args: ["9"], http_port: 8080 }), ConflictError);
    });
  });

  describe("checkpoints", () => {
    it("create, list, get; restore brings a file back; the active one cannot be removed", async () => {
      await box.files.write("keep.txt", "version 1");
      const cp = await box.checkpoints.create({ comment: "first" });
      assert.match(cp.id, /^v\d+$/);
      assert.equal(cp.comment, "first");
      assert.deepEqual(await box.checkpoints.get(cp.id), cp);
      assert.ok((await box.checkpoints.list()).some((c) => c.id === cp.id));

      await box.files.write("keep.txt", "version 2");
      await box.files.remove("hello.txt");
      const progress: string[] = [];
      const r = await box.checkpoints.restore(cp.id, { onEvent: (e) => progress.push(e.type) });
      assert.equal(r.restored, cp.id);
      assert.match(r.backup ?? "", /^v\d+$/);
      assert.equal(progress.at(-1), "complete");
      assert.equal(await box.files.read("keep.txt"), "version 1");
      assert.equal(await box.files.read("hello.txt"), "héllo\n");

      await assert.rejects(box.checkpoints.remove(cp.id), (err: unknown) => {
        assert.ok(err instanceof ConflictError, String(err));
        assert.equal(err.code, "UMS_CHECKPOINT_ACTIVE");
        return true;
      });
      await box.checkpoints.remove(r.backup as string);
      await assert.rejects(box.checkpoints.get(r.backup as string), NotFoundError);
      await assert.rejects(box.checkpoints.restore("v999"), (err: unknown) => {
        assert.ok(err instanceof NotFoundError, String(err));
        assert.equal(err.code, "UMS_CHECKPOINT_NOT_FOUND");
        return true;
      });
    });

    it("Unit.create with from forks a checkpoint of another unit", async () => {
      const [cp] = (await box.checkpoints.list()).filter((c) => c.comment === "first");
      assert.ok(cp);
      const fork = await Unit.create({ name: "fork", client, from: { unit: "box", checkpoint: cp.id } });
      assert.equal(fork.name, "fork");
      assert.equal(await fork.files.read("keep.txt"), "version 1");
      await fork.files.write("keep.txt", "fork's own");
      assert.equal(await box.files.read("keep.txt"), "version 1");
      await assert.rejects(Unit.create("fork2", { client, from: { unit: "box", checkpoint: "v999" } }), NotFoundError);
      await fork.delete();
    });
  });

  describe("nodes (issue #15)", () => {
    it("client.nodes lists the host's node and gets it by name; a unit names it", async () => {
      const nodes = await client.nodes.list();
      assert.equal(nodes.length, 1);
      const [n] = nodes;
      assert.ok(n);
      assert.equal(n.up, true);
      assert.equal(n.state, "active");
      assert.equal(n.status, "up");
      assert.ok(n.units >= 1, "box is on it");
      assert.ok(n.memoryBytes > 0 && n.diskFreeBytes > 0 && n.heartbeatAt instanceof Date);
      assert.ok(!("address" in n));
      const one = await client.nodes.get(n.name);
      assert.deepEqual([one.id, one.name, one.units], [n.id, n.name, n.units]);
      assert.equal((await box.refresh()).node, n.name);
    });

    it("an unknown node is NotFoundError; a member token gets UMS_ADMIN_REQUIRED (403)", async () => {
      await assert.rejects(client.nodes.get("no-such-node"), (err: unknown) => {
        assert.ok(err instanceof NotFoundError, String(err));
        assert.equal(err.code, "UMS_NODE_NOT_FOUND");
        assert.equal(err.status, 404);
        return true;
      });
      const minted = await client.request<{ token: string }>("POST", "/v1/organizations/subapis/tokens", {
        body: { role: "member" },
      });
      const member = new Client({ baseUrl: server.baseUrl, token: minted.token, timeoutMs: 60_000 });
      await assert.rejects(member.nodes.list(), (err: unknown) => {
        assert.ok(err instanceof UmsError, String(err));
        assert.equal(err.code, "UMS_ADMIN_REQUIRED");
        assert.equal(err.status, 403);
        return true;
      });
    });
  });
});
