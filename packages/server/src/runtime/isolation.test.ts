import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DEFAULT_UNIT_DISK_MB } from "../config.js";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";
import { testImage } from "./image/test-image.js";

/** Issue: a unit is isolated from the host and from what it must not touch. */
describe("unit isolation", () => {
  /** What units must not reach on the host: a file and a service listening on every address. */
  const marker = `/tmp/ums-host-marker-${process.pid}`;
  const listener: Server = createServer((c) => c.end("host service\n"));
  let s: TestServer;
  let token: string;
  let unitId: string;
  const sh = (script: string, opts = {}) => execHttp(s.url, token, "iso", ["sh", "-c", script], opts);

  before(async () => {
    s = await startSqliteServer();
    token = await s.token("iso");
    unitId = await s.unit(token, "iso");
    await writeFile(marker, "host secret");
    listener.listen(0, "0.0.0.0");
  });
  after(async () => {
    listener.close();
    await rm(marker, { force: true });
    await s?.close();
  });

  it("has its own PID 1 (catatonit, the agent its child), hostname and process table", async () => {
    const r = await sh("cat /proc/1/cmdline | tr '\\0' ' '; echo; hostname; ps -eo args --no-headers");
    const [init, hostname, ...procs] = r.stdout.toString().trim().split("\n");
    assert.match(init ?? "", /^\/.unit\/bin\/catatonit -- \/.unit\/bin\/node \/.unit\/agent\/agent.cjs/);
    assert.equal(hostname, "iso");
    assert.ok(procs.length < 10, procs.join("\n"));
    assert.ok(!procs.some((p) => /run-tests|--test|runc|containerd/.test(p)), procs.join("\n"));
  });

  it("runs its agent from the code cache the build made (same node, same flags)", async () => {
    const r = await sh("/.unit/bin/node /.unit/agent/agent.cjs --code-cache-status");
    assert.deepEqual(JSON.parse(r.stdout.toString()), { used: true, file: "/.unit/agent/agent-bundle.cache" });
  });

  it("sees none of the host's files", async () => {
    const r = await sh(
      `test -e ${marker} && echo visible; test -e /work && echo work; test -e /var/tmp/ums-test-pool && echo pool; echo end`,
    );
    assert.equal(r.stdout.toString(), "end\n");
  });

  it("cannot write to what ums mounts in, even as root", async () => {
    const r = await sh(
      'for f in /root/control /.unit/bin/node /.unit/agent/agent.cjs /.unit/agent/agent-bundle.cjs /.unit/agent/agent-bundle.cache /.unit/agent/new /proc/sys/kernel/hostname /sys/kernel/x; do sudo sh -c ": > $f" 2>/dev/null && echo wrote $f; done; echo end',
    );
    assert.equal(r.stdout.toString(), "wrote /root/control\nend\n", "root writes its own files and nothing else");
  });

  it("is root only inside its user namespace: files it owns are an unprivileged uid on the host", async () => {
    const r = await sh("cat /proc/self/uid_map; sudo touch /root/made-by-root; sudo id -u");
    assert.match(r.stdout.toString(), /^\s*0\s+100000\s+65536\n0\n$/);
    const image = await testImage();
    const st = await stat(join(image.pool.path, "units", unitId, "rootfs", "root", "made-by-root"));
    assert.equal(st.uid, 100000);
    assert.equal(st.gid, 100000);
  });

  it("cannot reach the host's services, the API port included", async () => {
    const ip = (await sh("ip -4 -o addr show eth0 | awk '{print $4}'")).stdout.toString().trim();
    const [addr] = ip.split("/");
    const octets = (addr ?? "").split(".").map(Number);
    const hostIp = [...octets.slice(0, 3), (octets[3] ?? 0) - 1].join(".");
    // Test servers take /24s of 10.210.0.0/16 (testing/runtime.ts).
    assert.match(hostIp, /^10\.210\.\d+\.\d+$/);
    const apiPort = s.server.port;
    const servicePort = (listener.address() as { port: number }).port;
    for (const target of [
      `${hostIp}:${apiPort}`,
      `${hostIp}:${servicePort}`,
      `127.0.0.1:${apiPort}`,
      `169.254.169.254:80`,
    ]) {
      const r = await sh(`curl -s --max-time 1 -o /dev/null http://${target}/ && echo reached; echo end`);
      assert.equal(r.stdout.toString(), "end\n", `${target} must be unreachable`);
    }
    // Control: curl works in the unit, against a server of its own.
    const self = await sh(
      "python3 -m http.server 8123 >/dev/null 2>&1 & for i in 1 2 3 4 5 6 7 8 9 10; do curl -s --max-time 1 -o /dev/null http://127.0.0.1:8123/ && echo reached && break; sleep 0.2; done; kill %1",
    );
    assert.equal(self.stdout.toString(), "reached\n");
  });

  it("kills a process that allocates past the memory limit", async () => {
    const set = await s.api("POST", "/v1/units/iso/policy/resources", { token, json: { memory: { limit_mb: 64 } } });
    assert.equal(set.status, 200);
    assert.deepEqual(set.body.memory, { limit_mb: 64 });
    const r = await execHttp(s.url, token, "iso", [
      "python3",
      "-c",
      "b = bytearray(300 * 1024 * 1024); print('survived')",
    ]);
    assert.equal(r.exitCode, 137, `${r.stdout} ${r.stderr}`);
    assert.equal((await sh("echo still-here")).stdout.toString(), "still-here\n", "the unit itself lives on");
    const reset = await s.api("DELETE", "/v1/units/iso/policy/resources", { token });
    assert.deepEqual(
      reset.body,
      { memory: { limit_mb: 512 }, pids: { limit: 1024 }, cpu: { cores: 1 }, disk: { limit_mb: DEFAULT_UNIT_DISK_MB } },
      "the defaults",
    );
    const ok = await execHttp(s.url, token, "iso", [
      "python3",
      "-c",
      "b = bytearray(300 * 1024 * 1024); print('survived')",
    ]);
    assert.equal(ok.stdout.toString(), "survived\n");
  });

  it("validates policies with 400s naming the field", async () => {
    const bad = await s.api("POST", "/v1/units/iso/policy/resources", { token, json: { memory: { limit_mb: 1 } } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.errors[0], /^memory\.limit_mb: must be >= 32$/);
    const priv = await s.api("POST", "/v1/units/iso/policy/privileges", {
      token,
      json: { profile: "root", devices: ["gpu"] },
    });
    assert.equal(priv.status, 400);
    assert.equal(priv.body.errors.length, 2, JSON.stringify(priv.body.errors));
    const good = await s.api("POST", "/v1/units/iso/policy/privileges", {
      token,
      json: { profile: "minimal", devices: ["fuse"] },
    });
    assert.deepEqual(good.body, { profile: "minimal", devices: ["fuse"], no_new_privileges: false });
    assert.deepEqual((await s.api("GET", "/v1/units/iso/policy/privileges", { token })).body, good.body);
    const reset = await s.api("DELETE", "/v1/units/iso/policy/privileges", { token });
    assert.deepEqual(reset.body, { profile: "standard", devices: [], no_new_privileges: false });
  });

  it("leaves nothing on the host when deleted", async () => {
    assert.equal((await s.api("DELETE", "/v1/units/iso", { token })).status, 204);
    const image = await testImage();
    assert.equal(existsSync(join(image.pool.path, "units", unitId)), false, "subvolume gone");
    assert.equal(existsSync(join(s.config.dataDir, "run", unitId)), false, "runtime dir gone");
    assert.equal(existsSync(join(s.config.dataDir, "runc", unitId)), false, "container gone");
    const { execFileSync } = await import("node:child_process");
    const rid = (s.server.runtime as unknown as { cfg: { rid: string } }).cfg.rid;
    assert.ok(!execFileSync("ip", ["netns", "list"]).toString().includes(`ums${rid}-`), "network namespace gone");
    assert.ok(!execFileSync("ip", ["-o", "link"]).toString().includes(`u${rid}`), "veth gone");
    assert.equal(existsSync(`/sys/fs/cgroup/memory/ums-${rid}/${unitId}`), false, "cgroup gone");
  });
});
