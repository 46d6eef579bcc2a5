import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { describe, it } from "node:test";
import WebSocket from "ws";
import { FS_BASE, fsUnit, HOME, qs } from "../../testing/fs-unit.js";
import { resolveIn } from "./paths.js";

/** Spec 4.4 / docs/ARCHITECTURE.md section 10: the filesystem API against a real unit (streaming: transfer.test.ts). */
describe("filesystem API", () => {
  const u = fsUnit();
  const { sh, write, read, list, post } = u;
  const base = FS_BASE;

  it("writes, reads and lists as the unit user, relative paths against workingDir", async () => {
    const w = await write("docs/a.txt", "hello\n", { mkdir: true, mode: "0640" });
    assert.equal(w.status, 200, w.text);
    assert.deepEqual(w.body, { path: `${HOME}/docs/a.txt`, size: 6, mode: "0640" });
    assert.equal(await sh(`stat -c '%u %g %a' ${HOME}/docs/a.txt ${HOME}/docs`), "1000 1000 640\n1000 1000 755\n");
    const r = await read("docs/a.txt");
    assert.equal(r.status, 200);
    assert.equal(r.text, "hello\n");
    assert.equal(r.headers.get("content-length"), "6");
    // mkdirParents (public clients) works like mkdir; an absolute path ignores workingDir
    assert.equal((await write("/home/unit/deep/er/b.bin", "xy", { mkdirParents: true })).status, 200);
    const l = await list("docs");
    assert.equal(l.status, 200);
    assert.equal(l.body.path, `${HOME}/docs`);
    assert.equal(l.body.count, 1);
    const [e] = l.body.entries;
    assert.deepEqual(
      { ...e, modTime: typeof e.modTime },
      {
        name: "a.txt",
        path: `${HOME}/docs/a.txt`,
        type: "file",
        size: 6,
        mode: "0640",
        modTime: "string",
        isDir: false,
      },
    );
    assert.ok(!Number.isNaN(Date.parse(e.modTime)));
    // a file lists as its one entry (docs/ARCHITECTURE.md section 10)
    const f = await list(`${HOME}/docs/a.txt`);
    assert.equal(f.body.count, 1);
    assert.equal(f.body.entries[0].name, "a.txt");
    const glob = await list("deep", { recursive: true, pattern: "*.bin" });
    assert.deepEqual(
      glob.body.entries.map((x: { name: string }) => x.name),
      ["b.bin"],
    );
    const rec = await list("deep", { recursive: true });
    assert.deepEqual(
      rec.body.entries.map((x: { path: string; isDir: boolean }) => [x.path, x.isDir]),
      [
        [`${HOME}/deep/er`, true],
        [`${HOME}/deep/er/b.bin`, false],
      ],
    );
  });

  it("runs as the unit user unless asRoot", async () => {
    const denied = await write("/root/x.txt", "no");
    assert.equal(denied.status, 400);
    assert.equal(denied.body.code, "EACCES");
    assert.equal(denied.body.path, "/root/x.txt");
    assert.match(denied.body.error, /permission denied/);
    const ok = await write("/root/x.txt", "yes", { asRoot: true });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(await sh("stat -c %u /root/x.txt", "root"), "0\n");
    assert.equal((await read("/root/x.txt")).body?.code, "EACCES");
    assert.equal((await read("/root/x.txt", { asRoot: true })).text, "yes");
    const del = await post("delete", { path: "/root/x.txt" });
    assert.equal(del.body.code, "EACCES");
    assert.deepEqual((await post("delete", { path: "/root/x.txt", asRoot: true })).body, {
      deleted: ["/root/x.txt"],
      count: 1,
    });
  });

  it("chmod, chown, copy, rename and delete", async () => {
    await sh(`mkdir -p ${HOME}/t/sub && printf 12345 > ${HOME}/t/sub/f && printf abc > ${HOME}/t/g`);
    const cm = await post("chmod", { path: "t", mode: "750", recursive: true });
    assert.equal(cm.status, 200, cm.text);
    assert.deepEqual(
      cm.body.affected.map((a: { path: string }) => a.path),
      [`${HOME}/t`, `${HOME}/t/g`, `${HOME}/t/sub`, `${HOME}/t/sub/f`],
    );
    assert.ok(cm.body.affected.every((a: { mode: string }) => a.mode === "0750"));
    assert.equal(cm.body.count, 4);
    assert.equal(await sh(`stat -c %a ${HOME}/t/sub/f`), "750\n");

    const notMine = await post("chown", { path: "t", uid: 0, gid: 0 });
    assert.equal(notMine.status, 400);
    assert.equal(notMine.body.code, "EPERM");
    const co = await post("chown", { path: "t/sub", uid: "root", gid: 0, recursive: true, asRoot: true });
    assert.equal(co.status, 200, co.text);
    assert.deepEqual(co.body, {
      affected: [
        { path: `${HOME}/t/sub`, uid: 0, gid: 0 },
        { path: `${HOME}/t/sub/f`, uid: 0, gid: 0 },
      ],
      count: 2,
    });
    assert.equal(await sh(`stat -c %u:%g ${HOME}/t/sub/f`, "root"), "0:0\n");
    await post("chown", { path: "t/sub", uid: 1000, gid: 1000, recursive: true, asRoot: true });

    const cp = await post("copy", { source: "t", dest: "t2", recursive: true, preserveAttrs: true });
    assert.equal(cp.status, 200, cp.text);
    assert.equal(cp.body.count, 4);
    assert.equal(cp.body.totalBytes, 8);
    assert.deepEqual(cp.body.copied[0], { source: `${HOME}/t`, dest: `${HOME}/t2` });
    assert.equal(await sh(`cat ${HOME}/t2/sub/f; stat -c %a ${HOME}/t2/g`), "12345750\n");
    const noRec = await post("copy", { source: "t", dest: "t3" });
    assert.equal(noRec.status, 400);
    assert.equal(noRec.body.code, "EISDIR");
    // copying onto an existing directory copies into it
    const into = await post("copy", { source: "t/g", dest: "t2/sub" });
    assert.deepEqual(into.body.copied, [{ source: `${HOME}/t/g`, dest: `${HOME}/t2/sub/g` }]);

    const rn = await post("rename", { source: "t2/g", dest: "t2/h" });
    assert.deepEqual(rn.body, { source: `${HOME}/t2/g`, dest: `${HOME}/t2/h` });
    assert.equal((await read("t2/h")).text, "abc");
    assert.equal((await read("t2/g")).status, 404);

    const notEmpty = await post("delete", { path: "t2" });
    assert.equal(notEmpty.status, 400);
    assert.equal(notEmpty.body.code, "ENOTEMPTY");
    // query parameters instead of a JSON body (docs/ARCHITECTURE.md section 10)
    const del = await u.s.api("DELETE", `${base}/delete?${qs({ path: "t2", workingDir: HOME, recursive: true })}`, {
      token: u.token,
    });
    assert.equal(del.status, 200, del.text);
    assert.equal(del.body.count, 5); // t2, t2/h, t2/sub, t2/sub/f, t2/sub/g
    assert.equal(del.body.deleted.at(-1), `${HOME}/t2`);
    const json = await u.s.api("DELETE", `${base}/delete`, {
      token: u.token,
      json: { path: "t", workingDir: HOME, recursive: true, asRoot: false },
    });
    assert.equal(json.status, 200, json.text);
    assert.equal(await sh(`ls ${HOME}/t ${HOME}/t2 2>&1 | wc -l`), "2\n");
  });

  it("answers each error with its errno code and path", async () => {
    const missing = await read("nope/x");
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, {
      error: `ENOENT: no such file or directory, open '${HOME}/nope/x'`,
      code: "ENOENT",
      path: `${HOME}/nope/x`,
    });
    assert.equal((await list("nope")).body.code, "ENOENT");
    assert.equal((await post("rename", { source: "nope", dest: "x" })).status, 404);
    const notDir = await list("/etc/passwd/x");
    assert.equal(notDir.status, 400);
    assert.equal(notDir.body.code, "ENOTDIR");
    const isDir = await read(HOME);
    assert.equal(isDir.status, 400);
    assert.equal(isDir.body.code, "EISDIR");
    assert.equal((await write(HOME, "x")).body.code, "EISDIR");
    await sh(`ln -sf /nowhere ${HOME}/dangling; touch ${HOME}/exists`);
    const exists = await post("copy", { source: "dangling", dest: "exists" });
    assert.equal(exists.status, 400);
    assert.equal(exists.body.code, "EEXIST");
    assert.equal(exists.body.path, `${HOME}/exists`);
  });

  it("rejects bad input with 400 and the validation shape", async () => {
    const noWd = await u.s.api("GET", `${base}/read?path=a`, { token: u.token });
    assert.equal(noWd.status, 400);
    assert.equal(noWd.body.code, "UMS_VALIDATION");
    assert.deepEqual(noWd.body.errors, ["workingDir: is required"]);
    const rel = await u.s.api("GET", `${base}/list?path=a&workingDir=rel`, { token: u.token });
    assert.deepEqual(rel.body.errors, ["workingDir: must be an absolute path"]);
    const mode = await write("m.txt", "x", { mode: "999" });
    assert.equal(mode.status, 400);
    assert.match(mode.body.errors[0], /^mode: must be an octal permission string/);
    assert.equal((await post("chmod", { path: "x", mode: "rwx" })).status, 400);
    assert.equal((await post("chmod", { path: "x" })).body.errors[0], "mode: is required");
    assert.equal((await post("chown", { path: "x" })).body.errors[0], "uid: uid or gid is required");
    assert.equal((await post("rename", { source: "x" })).body.errors[0], "dest: is required");
    assert.equal((await post("copy", { source: "x", dest: "y", recursive: "yes" })).status, 400);
    assert.equal((await u.s.api("DELETE", `${base}/delete`, { token: u.token })).body.errors[0], "path: is required");
    assert.equal((await u.s.api("GET", `/v1/units/nope/fs/list?path=/&workingDir=/`, { token: u.token })).status, 404);
    assert.equal((await u.s.api("GET", `${base}/list?path=/&workingDir=/`)).status, 401);
  });

  it("never reaches a host file: .., absolute paths, symlinks, /proc", async () => {
    const marker = `/tmp/ums-host-secret-${process.pid}`;
    const secret = `host-secret-${process.pid}-${Date.now()}`;
    writeFileSync(marker, secret);
    try {
      await sh(`ln -sf ${marker} ${HOME}/link; ln -sfn /tmp ${HOME}/tmplink`);
      const attempts = [
        marker,
        `../../../../../../../..${marker}`,
        `${HOME}/../../../..${marker}`,
        "link",
        `tmplink/ums-host-secret-${process.pid}`,
        `/proc/1/root${marker}`,
        `/proc/self/root${marker}`,
        `/proc/self/cwd/../../..${marker}`,
        `/proc/1/cwd${marker}`,
      ];
      for (const p of attempts) {
        for (const asRoot of [false, true]) {
          const r = await read(p, { asRoot });
          assert.ok(!r.text.includes(secret), `read ${p} (asRoot ${asRoot}) reached the host file`);
          assert.ok([400, 404].includes(r.status), `read ${p}: ${r.status} ${r.text}`);
          const l = await list(p.replace(/\/ums-host-secret-\d+$/, ""), { asRoot });
          assert.ok(!l.text.includes(`ums-host-secret-${process.pid}`), `list of ${p} shows the host file`);
        }
      }
      // writing through a link that points at the host path writes the unit's own /tmp
      const w = await write("link", "overwritten", { asRoot: true });
      assert.equal(w.status, 200, w.text);
      assert.equal(readFileSync(marker, "utf8"), secret);
      assert.equal(await sh(`cat ${marker}`), "overwritten");
      // the file it leads to is replaced, in its own directory: the link stays a link
      assert.equal(await sh(`test -L ${HOME}/link && echo link`), "link\n");
      // and through a linked directory: the unit's /tmp again, never the host's
      const viaDir = await write(`tmplink/ums-host-secret-${process.pid}`, "again", { asRoot: true });
      assert.equal(viaDir.status, 200, viaDir.text);
      assert.equal(readFileSync(marker, "utf8"), secret);
      assert.equal(await sh(`cat ${marker}; ls -A /tmp ${HOME} | grep -c ums-write-`), "again0\n");
      const cp = await post("copy", { source: "link", dest: "/tmp/copied", asRoot: true });
      assert.equal(cp.status, 200, cp.text);
      assert.equal(readFileSync(marker, "utf8"), secret);
    } finally {
      rmSync(marker, { force: true });
    }
  });

  /** The temporary files of writes in progress (agent fs/write.ts) in the unit's `dir`. */
  const temps = async (dir: string) =>
    (await sh(`ls -A ${dir}`, "root")).split("\n").filter((n) => /\.ums-write-[0-9a-f]{16}$/.test(n));

  it("a write cut short (the client gone halfway) leaves the file as it was, and no temporary file", async () => {
    const original = "acknowledged content\n".repeat(100);
    assert.equal((await write("keep/me.txt", original, { mkdir: true })).status, 200);
    const inode = await sh(`stat -c %i ${HOME}/keep/me.txt`);
    const url = new URL(u.s.url);
    for (const framing of ["content-length", "chunked"] as const) {
      const req = request({
        host: url.hostname,
        port: url.port,
        method: "PUT",
        path: `${base}/write?${qs({ path: "keep/me.txt", workingDir: HOME })}`,
        headers: {
          authorization: `Bearer ${u.token}`,
          "content-type": "application/octet-stream",
          ...(framing === "content-length" ? { "content-length": String(8 * 1024 * 1024) } : {}),
        },
      });
      req.on("error", () => {});
      req.write(Buffer.alloc(256 * 1024, "x")); // half a body (of an announced 8 MiB, or chunked with no end)
      let seen: string[] = [];
      for (let i = 0; i < 100 && seen.length === 0; i++) {
        seen = await temps(`${HOME}/keep`);
        if (seen.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(seen.length, 1, `${framing}: the body goes to a temporary file beside the target`);
      req.destroy();
      for (let i = 0; i < 100 && (await temps(`${HOME}/keep`)).length > 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(await temps(`${HOME}/keep`), [], `${framing}: the temporary file is removed`);
      const r = await read("keep/me.txt");
      assert.equal(r.status, 200);
      assert.equal(r.text, original, `${framing}: the file is as it was`);
      assert.equal(await sh(`stat -c %i ${HOME}/keep/me.txt`), inode, "the very same file");
    }
    // the next write replaces it whole
    const w = await write("keep/me.txt", "new");
    assert.deepEqual(w.body, { path: `${HOME}/keep/me.txt`, size: 3, mode: "0644" });
    assert.equal((await read("keep/me.txt")).text, "new");
  });

  it("overwriting a file keeps its owner and mode; with mode= the mode is exact", async () => {
    await sh(
      `mkdir -p /srv/own && printf old > /srv/own/f && chown 1234:2345 /srv/own/f && chmod 0640 /srv/own/f && ` +
        `printf old > ${HOME}/own.txt && chown 1000:1000 ${HOME}/own.txt && chmod 0640 ${HOME}/own.txt`,
      "root",
    );
    const before = await sh("stat -c %i /srv/own/f");
    const w = await write("/srv/own/f", "new content", { asRoot: true });
    assert.equal(w.status, 200, w.text);
    assert.deepEqual(w.body, { path: "/srv/own/f", size: 11, mode: "0640" });
    assert.equal(await sh("stat -c '%u %g %a' /srv/own/f; cat /srv/own/f", "root"), "1234 2345 640\nnew content");
    assert.notEqual(await sh("stat -c %i /srv/own/f"), before, "replaced by a new file (atomic)");
    const m = await write("/srv/own/f", "exact", { asRoot: true, mode: "0600" });
    assert.equal(m.body.mode, "0600");
    assert.equal(await sh("stat -c '%u %g %a' /srv/own/f", "root"), "1234 2345 600\n");
    // the unit user's own file, written as the unit user
    const mine = await write("own.txt", "mine");
    assert.deepEqual(mine.body, { path: `${HOME}/own.txt`, size: 4, mode: "0640" });
    assert.equal(await sh(`stat -c '%u %g %a' ${HOME}/own.txt`), "1000 1000 640\n");
    assert.equal((await write("own.txt", "mine", { mode: "0604" })).body.mode, "0604");
    assert.equal(await sh(`stat -c '%u %g %a' ${HOME}/own.txt`), "1000 1000 604\n");
    assert.deepEqual([...(await temps("/srv/own")), ...(await temps(HOME))], []);
    await sh("rm -r /srv/own", "root");
  });

  it("watches paths: create, modify, rename and delete events", async () => {
    await sh(`mkdir -p ${HOME}/w/inner`);
    const ws = new WebSocket(`${u.s.url.replace(/^http/, "ws")}${base}/watch`, {
      headers: { authorization: `Bearer ${u.token}` },
    });
    const events: Array<Record<string, unknown>> = [];
    const waiters: Array<() => void> = [];
    ws.on("message", (d) => {
      events.push(JSON.parse(String(d)));
      for (const w of waiters.splice(0)) w();
    });
    const until = async (pred: (e: Record<string, unknown>) => boolean, what: string) => {
      const deadline = Date.now() + 5000;
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        if (Date.now() > deadline) throw new Error(`no ${what} event; got ${JSON.stringify(events)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 200);
        });
      }
    };
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    try {
      ws.send(JSON.stringify({ type: "subscribe", path: "w", workingDir: HOME, recursive: true }));
      await until((e) => e.type === "subscribed", "subscribed");
      const ev = (event: string, path: string) => (e: Record<string, unknown>) =>
        e.type === "event" && e.event === event && e.path === path;
      await write("w/inner/n.txt", "1");
      await until(ev("create", `${HOME}/w/inner/n.txt`), "create");
      await new Promise((r) => setTimeout(r, 100));
      await write("w/inner/n.txt", "22");
      await until(ev("modify", `${HOME}/w/inner/n.txt`), "modify");
      await post("rename", { source: "w/inner/n.txt", dest: "w/m.txt" });
      const rn = await until(ev("rename", `${HOME}/w/m.txt`), "rename");
      assert.equal(rn.oldPath, `${HOME}/w/inner/n.txt`);
      await post("delete", { path: "w/m.txt" });
      await until(ev("delete", `${HOME}/w/m.txt`), "delete");
      // a watch of a missing path answers an error message with the errno
      ws.send(JSON.stringify({ type: "subscribe", path: "/nope" }));
      const err = await until((e) => e.type === "error", "error");
      assert.equal(err.code, "ENOENT");
    } finally {
      ws.close();
    }
  });
});

describe("resolveIn", () => {
  it("resolves relative paths against workingDir and normalises . and ..", () => {
    assert.equal(resolveIn("/home/unit", "a/b"), "/home/unit/a/b");
    assert.equal(resolveIn("/home/unit", "/etc/x"), "/etc/x");
    assert.equal(resolveIn("/home/unit", "../../../../etc/./x/"), "/etc/x");
    assert.equal(resolveIn("/", ".."), "/");
    assert.throws(() => resolveIn("/", "a\0b"), /NUL/);
  });
});
