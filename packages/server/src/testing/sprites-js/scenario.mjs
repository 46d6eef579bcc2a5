// The Sprites JS client scenario (issue #12): every step through the public API of the published
// `@fly/sprites`, run by Node 24 against a real `ums serve` at UMS_BASE_URL. No shim, no raw fetch.
// Each step prints one JSON line: {step, ok, ms, error?} or {step, ok: false, skipped}. A step runs
// only when the steps it needs passed; each is bounded in time. Run by run.ts (testing/sprites-js).

const { SpritesClient, APIError, ExecError } = await import(process.env.SPRITES_JS_ENTRY);

const client = new SpritesClient(process.env.UMS_TOKEN, { baseURL: process.env.UMS_BASE_URL });
const prefix = process.env.UMS_PREFIX;
const names = { main: `${prefix}-main`, second: `${prefix}-b`, third: `${prefix}-c` };
const STEP_TIMEOUT_MS = 90_000;

const passed = new Set();
const report = (r) => process.stdout.write(`${JSON.stringify(r)}\n`);

function check(cond, what) {
  if (!cond) throw new Error(what);
}
function eq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
}

async function step(name, needs, fn) {
  const missing = needs.filter((n) => !passed.has(n));
  if (missing.length > 0) {
    report({ step: name, ok: false, ms: 0, skipped: `needs ${missing.join(", ")}` });
    return;
  }
  const started = performance.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`step timed out after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
      }),
    ]);
    passed.add(name);
    report({ step: name, ok: true, ms: Math.round(performance.now() - started) });
  } catch (err) {
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    report({ step: name, ok: false, ms: Math.round(performance.now() - started), error: detail });
  } finally {
    clearTimeout(timer);
  }
}

/** Everything a command wrote until it exited, and its exit code. */
function collect(cmd) {
  const out = [];
  const err = [];
  cmd.stdout.on("data", (d) => out.push(d));
  cmd.stderr.on("data", (d) => err.push(d));
  return new Promise((resolve, reject) => {
    cmd.on("error", reject);
    cmd.on("exit", (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
    );
  });
}

/** Resolves once `pred(output so far)` holds for a TTY command's output. */
function outputUntil(cmd, pred, what) {
  let text = "";
  return new Promise((resolve, reject) => {
    const onData = (d) => {
      text += d.toString();
      if (pred(text)) {
        cmd.stdout.off("data", onData);
        resolve(text);
      }
    };
    cmd.stdout.on("data", onData);
    cmd.on("error", reject);
    cmd.on("exit", (code) => reject(new Error(`exited (${code}) before ${what}; output: ${JSON.stringify(text)}`)));
  });
}

async function drain(stream) {
  const events = [];
  for await (const e of stream) events.push(e);
  return events;
}

const sprite = client.sprite(names.main);

await step("create", [], async () => {
  const created = await client.createSprite(names.main, {
    config: { ramMB: 768, cpus: 1, storageGB: 5 },
    labels: ["compat", "scenario"],
    waitForCapacity: true,
  });
  eq(created.name, names.main, "name");
  check(/^unit-/.test(created.id), `id ${created.id}`);
  eq(created.labels, ["compat", "scenario"], "labels");
  eq(created.config, { ramMB: 768, cpus: 1, region: undefined, storageGB: 5 }, "config");
  await client.createSprite(names.second);
  await client.createSprite(names.third, { labels: ["other"] });
});

await step("get", ["create"], async () => {
  const got = await client.getSprite(names.main);
  eq(got.name, names.main, "name");
  check(typeof got.url === "string" && got.url.startsWith("http"), `url ${got.url}`);
  eq(got.labels, ["compat", "scenario"], "labels");
  eq(got.config?.storageGB, 5, "config.storageGB");
  check(got.createdAt instanceof Date && !Number.isNaN(got.createdAt.getTime()), "createdAt");
  const missing = await client.getSprite(`${prefix}-none`).then(
    () => undefined,
    (e) => e,
  );
  check(missing instanceof APIError && missing.statusCode === 404, `missing sprite: ${missing}`);
});

await step("list", ["create"], async () => {
  const first = await client.listSprites({ prefix, maxResults: 2 });
  const sorted = Object.values(names).sort();
  eq(
    first.sprites.map((s) => s.name),
    sorted.slice(0, 2),
    "first page",
  );
  check(first.hasMore && typeof first.nextContinuationToken === "string", "hasMore with a token");
  const second = await client.listSprites({ prefix, maxResults: 2, continuationToken: first.nextContinuationToken });
  eq(
    second.sprites.map((s) => s.name),
    sorted.slice(2),
    "second page",
  );
  eq(second.hasMore, false, "second page hasMore");
  const all = await client.listAllSprites(prefix);
  eq(all.map((s) => s.name).sort(), Object.values(names).sort(), "listAllSprites");
  check(typeof first.organizationName === "string", "organization name");
});

await step("update", ["create"], async () => {
  await sprite.updateURLSettings({ auth: "public" });
  eq((await client.getSprite(names.main)).urlSettings?.auth, "public", "url_settings.auth");
  const updated = await sprite.update({ labels: ["relabelled"] });
  eq(updated.labels, ["relabelled"], "labels after update");
  eq(updated.urlSettings?.auth, "public", "url_settings kept");
});

await step("check", ["create"], async () => {
  const health = await sprite.check();
  eq(health.spriteName, names.main, "sprite_name");
  check(/^unit-/.test(health.spriteId), `sprite_id ${health.spriteId}`);
  check(["healthy", "hibernated", "unhealthy", "error"].includes(health.status), `status ${health.status}`);
});

// The client splits HTTP exec frames by the chunks its reads return (its own documentation says so:
// frames the network coalesces cannot be told apart), so each frame here comes a moment after the last.
await step("exec-http", ["create"], async () => {
  const ok = await sprite.execFileHTTP("sh", ["-c", "echo out; sleep 0.3; echo err >&2; sleep 0.3"]);
  eq([ok.stdout, ok.stderr, ok.exitCode], ["out\n", "err\n", 0], "output");
  const fed = await sprite.execFileHTTP("sh", ["-c", "cat; sleep 0.3"], { input: "from stdin" });
  eq(fed.stdout, "from stdin", "stdin");
  const failed = await sprite.execFileHTTP("sh", ["-c", "echo no; sleep 0.3; exit 3"]).then(
    () => undefined,
    (e) => e,
  );
  check(failed instanceof ExecError && failed.exitCode === 3 && failed.stdout === "no\n", `exit 3: ${failed}`);
});

await step("exec-ws", ["create"], async () => {
  const r = await sprite.execFile("sh", ["-c", "echo $GREETING from $(pwd)"], { env: { GREETING: "hi" }, cwd: "/tmp" });
  eq(r.stdout, "hi from /tmp\n", "execFile");
  eq((await sprite.exec("echo split by spaces")).stdout, "split by spaces\n", "exec");
  const cat = sprite.spawn("cat", []);
  const done = collect(cat);
  await new Promise((resolve, reject) => {
    cat.once("spawn", resolve);
    cat.once("error", reject);
  });
  cat.stdin.write("over the websocket\n");
  cat.stdin.end();
  eq(await done, { code: 0, stdout: "over the websocket\n", stderr: "" }, "spawn cat");
  const failing = await collect(sprite.spawn("sh", ["-c", "echo bad >&2; exit 7"]));
  eq(failing, { code: 7, stdout: "", stderr: "bad\n" }, "exit 7");
  const err = await sprite.execFile("false").then(
    () => undefined,
    (e) => e,
  );
  check(err instanceof ExecError && err.exitCode === 1, `false: ${err}`);
});

// In TTY mode the client takes the exit code from the websocket's close code: 0 for a normal
// closure (1000), 1 for any other.
await step("tty", ["create"], async () => {
  const cmd = sprite.spawn("sh", ["-c", "stty size; read line; stty size"], { tty: true, rows: 24, cols: 80 });
  const exited = new Promise((resolve) => cmd.on("exit", resolve));
  await outputUntil(cmd, (t) => t.includes("24 80"), "the first size");
  cmd.resize(100, 40);
  // The resize and the input go in order on one websocket.
  cmd.stdin.write("\r");
  await outputUntil(cmd, (t) => t.includes("40 100"), "the resized size");
  eq(await exited, 0, "exit code");
  const failing = sprite.spawn("sh", ["-c", "exit 4"], { tty: true });
  eq(await failing.wait(), 1, "a failure's exit code, as the client reports it");
});

let sessionId;
let session;
let attached;
await step("sessions-list", ["create"], async () => {
  session = sprite.createSession("sh", ["-c", "echo session-started; sleep 600"]);
  await outputUntil(session, (t) => t.includes("session-started"), "the session's output");
  const listed = await sprite.listSessions();
  const mine = listed.find((s) => s.command.includes("sleep 600"));
  check(mine, `the session in ${JSON.stringify(listed)}`);
  eq(mine.tty, true, "tty");
  sessionId = String(mine.id);
});

await step("sessions-attach", ["sessions-list"], async () => {
  attached = sprite.attachSession(sessionId);
  await new Promise((resolve, reject) => {
    attached.once("spawn", resolve);
    attached.once("error", reject);
  });
  await outputUntil(attached, (t) => t.includes("session-started"), "the replayed output");
});

await step("sessions-kill", ["sessions-list"], async () => {
  const exits = [session, attached].filter(Boolean).map((c) => c.wait());
  const events = await drain(await sprite.killSession(sessionId, "SIGTERM", "10s"));
  check(
    events.some((e) => e.type === "exit" || e.type === "complete"),
    `kill events: ${JSON.stringify(events)}`,
  );
  await Promise.all(exits);
  const left = await sprite.listSessions();
  check(!left.some((s) => String(s.id) === sessionId), `session ${sessionId} still listed: ${JSON.stringify(left)}`);
});

const fs = sprite.filesystem("/tmp");
await step("fs-write-read", ["create"], async () => {
  await fs.writeFile("compat/hello.txt", "hello, sprites");
  eq(await fs.readFile("compat/hello.txt", "utf8"), "hello, sprites", "read back");
  eq((await fs.readFile("/tmp/compat/hello.txt")).toString(), "hello, sprites", "absolute path, Buffer");
  const missing = await fs.readFile("compat/none.txt", "utf8").then(
    () => undefined,
    (e) => e,
  );
  eq(missing?.code, "ENOENT", "missing file code");
});

await step("fs-list-stat", ["fs-write-read"], async () => {
  eq(await fs.readdir("compat"), ["hello.txt"], "readdir");
  const dirents = await fs.readdir("compat", { withFileTypes: true });
  check(dirents[0].isFile() && !dirents[0].isDirectory(), "dirent is a file");
  const st = await fs.stat("compat/hello.txt");
  eq([st.size, st.isFile(), st.isDirectory()], [14, true, false], "stat");
  eq(await fs.exists("compat/none.txt"), false, "exists(missing)");
});

await step("fs-mkdir", ["fs-write-read"], async () => {
  await fs.mkdir("compat/deep/er", { recursive: true });
  // The client's stat reads the first entry of a list, which for a directory is its first child;
  // the new directory is seen from its parent.
  const [entry] = await fs.readdir("compat/deep", { withFileTypes: true });
  eq([entry?.name, entry?.isDirectory()], ["er", true], "a directory");
  eq(await fs.readdir("compat/deep/er"), [], "empty");
});

await step("fs-rename-copy", ["fs-write-read"], async () => {
  await fs.copyFile("compat/hello.txt", "compat/copy.txt");
  await fs.rename("compat/copy.txt", "compat/moved.txt");
  eq(await fs.readFile("compat/moved.txt", "utf8"), "hello, sprites", "copied then renamed");
  eq(await fs.exists("compat/copy.txt"), false, "the old name is gone");
});

await step("fs-chmod", ["fs-write-read"], async () => {
  await fs.chmod("compat/hello.txt", 0o640);
  eq((await fs.stat("compat/hello.txt")).mode & 0o777, 0o640, "mode");
});

await step("fs-delete", ["fs-write-read"], async () => {
  await fs.rm("compat/hello.txt");
  eq(await fs.exists("compat/hello.txt"), false, "file removed");
  await fs.rm("compat", { recursive: true });
  eq(await fs.exists("compat"), false, "directory removed");
  await fs.rm("compat/none", { force: true });
});

await step("services-create", ["create"], async () => {
  const stream = await sprite.createService(
    "ticker",
    { cmd: "sh", args: ["-c", "echo ticker-up; exec sleep 600"], needs: [] },
    "2s",
  );
  const events = await drain(stream);
  check(events.length > 0, "events while starting");
});

await step("services-get-list", ["services-create"], async () => {
  const svc = await sprite.getService("ticker");
  eq([svc.name, svc.cmd, svc.args], ["ticker", "sh", ["-c", "echo ticker-up; exec sleep 600"]], "service");
  check(svc.state?.status === "running", `state ${JSON.stringify(svc.state)}`);
  const all = await sprite.listServices();
  check(
    all.some((s) => s.name === "ticker"),
    `list ${JSON.stringify(all)}`,
  );
});

await step("services-logs", ["services-create"], async () => {
  const events = await drain(await sprite.getServiceLogs("ticker", { lines: 10 }));
  check(
    events.some((e) => typeof e.data === "string" && e.data.includes("ticker-up")),
    `logs ${JSON.stringify(events)}`,
  );
});

await step("services-stop-start", ["services-create"], async () => {
  await drain(await sprite.stopService("ticker", "5s"));
  eq((await sprite.getService("ticker")).state?.status, "stopped", "stopped");
  await drain(await sprite.startService("ticker", "1s"));
  eq((await sprite.getService("ticker")).state?.status, "running", "running again");
});

await step("services-signal", ["services-create"], async () => {
  await sprite.signalService("ticker", "TERM");
});

await step("services-delete", ["services-create"], async () => {
  await sprite.deleteService("ticker");
  check(!(await sprite.listServices()).some((s) => s.name === "ticker"), "gone from the list");
});

await step("policy", ["create"], async () => {
  const before = await sprite.getNetworkPolicy();
  check(Array.isArray(before.rules), `rules ${JSON.stringify(before)}`);
  const rules = [
    { domain: "example.com", action: "allow" },
    { domain: "*", action: "deny" },
  ];
  await sprite.updateNetworkPolicy({ rules });
  eq(
    (await sprite.getNetworkPolicy()).rules.map((r) => [r.domain, r.action]),
    rules.map((r) => [r.domain, r.action]),
    "rules after update",
  );
  const bad = await sprite.updateNetworkPolicy({ rules: [{ domain: "example.com" }] }).then(
    () => undefined,
    (e) => e,
  );
  check(bad instanceof Error && /Invalid policy/.test(bad.message), `bad policy: ${bad}`);
});

let checkpointId;
await step("checkpoints", ["create"], async () => {
  await sprite.execFile("sh", ["-c", "echo before > /home/unit/marker"]);
  const events = await drain(await sprite.createCheckpoint("compat scenario"));
  const complete = events.find((e) => e.type === "complete");
  check(complete, `checkpoint events: ${JSON.stringify(events)}`);
  const listed = await sprite.listCheckpoints();
  const mine = listed.find((c) => c.comment === "compat scenario");
  check(mine, `checkpoint in ${JSON.stringify(listed)}`);
  check(mine.createTime instanceof Date && !Number.isNaN(mine.createTime.getTime()), "createTime");
  checkpointId = mine.id;
  const got = await sprite.getCheckpoint(checkpointId);
  eq([got.id, got.comment], [checkpointId, "compat scenario"], "getCheckpoint");
  const history = await sprite.listCheckpoints(checkpointId);
  check(
    history.some((c) => c.id === checkpointId),
    `history filter ${JSON.stringify(history)}`,
  );
});

await step("restore", ["checkpoints"], async () => {
  await sprite.execFile("sh", ["-c", "echo after > /home/unit/marker"]);
  const events = await drain(await sprite.restoreCheckpoint(checkpointId));
  check(
    events.some((e) => e.type === "complete"),
    `restore events: ${JSON.stringify(events)}`,
  );
  eq((await sprite.execFile("cat", ["/home/unit/marker"])).stdout, "before\n", "the file as checkpointed");
});

// Control mode: execFile over the pooled /control websocket. The client falls back to the exec
// websocket on ANY failure there, a command's non-zero exit included (its ExecError is caught), so a
// failing command runs twice whatever the server does; each run appends a line, and the count shows
// where it ran. The server's log counts the ops of the control connection (sprites-js.test.ts).
await step("control-exec", ["create"], async () => {
  const ctl = new SpritesClient(process.env.UMS_TOKEN, { baseURL: process.env.UMS_BASE_URL, controlMode: true });
  const unit = ctl.sprite(names.main);
  const runs = (tag) => `echo ${tag} >> /tmp/control-runs`;
  try {
    const failed = await unit.execFile("sh", ["-c", `${runs("fail")}; echo out; echo err >&2; exit 3`]).then(
      () => undefined,
      (e) => e,
    );
    check(failed instanceof ExecError, `exit 3: ${failed}`);
    eq([failed.exitCode, failed.stdout, failed.stderr], [3, "out\n", "err\n"], "the failing command's result");
    check(unit.hasControlConnection(), "a control connection is pooled");
    const ok = await unit.execFile("sh", ["-c", `${runs("ok")}; echo fine`]);
    eq(ok.stdout, "fine\n", "the second command on the pooled connection");
  } finally {
    unit.closeControlConnection();
  }
  const ran = await sprite.execFile("cat", ["/tmp/control-runs"]);
  // Once over control, once again by the client's fallback; the successful command once.
  eq(ran.stdout, "fail\nfail\nok\n", "where the commands ran");
});

// Port forwarding: proxyPort listens on the test host's loopback and tunnels each connection to a
// port in the unit through /proxy. An echo server in the unit answers.
await step("proxy-port", ["create"], async () => {
  const { createServer, connect } = await import("node:net");
  const echo =
    "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1',7400))\ns.listen(8)\nimport os\nopen('/tmp/echo.pid','w').write(str(os.getpid()))\nopen('/tmp/echo.ready','w').close()\nwhile True:\n  c,_=s.accept()\n  while True:\n    d=c.recv(65536)\n    if not d: break\n    c.sendall(d)\n  c.close()\n";
  await sprite.execFile("sh", [
    "-c",
    `rm -f /tmp/echo.ready; printf '%s' "$0" > /tmp/echo.py; setsid python3 /tmp/echo.py >/dev/null 2>&1 < /dev/null & for i in $(seq 100); do [ -e /tmp/echo.ready ] && exit 0; sleep 0.1; done; exit 1`,
    echo,
  ]);
  // A free port of the test host's loopback (the client listens on "localhost").
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const localPort = probe.address().port;
  await new Promise((resolve) => probe.close(resolve));
  const session = await sprite.proxyPort(localPort, 7400);
  try {
    const socket = connect({ host: "localhost", port: localPort });
    const got = [];
    socket.on("data", (d) => got.push(d));
    await new Promise((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const text = "hello through the tunnel\n".repeat(1000);
    socket.write(text);
    const deadline = Date.now() + 30_000;
    while (Buffer.concat(got).length < text.length) {
      check(Date.now() < deadline, `echoed ${Buffer.concat(got).length} of ${text.length} bytes`);
      await new Promise((r) => setTimeout(r, 20));
    }
    eq(Buffer.concat(got).toString() === text, true, "the bytes echoed through the tunnel");
    socket.destroy();
  } finally {
    session.close();
    await sprite.execFile("sh", ["-c", 'kill "$(cat /tmp/echo.pid)"']).catch(() => {});
  }
  // The local port is closed with the session.
  const refused = await new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port: localPort });
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", () => resolve(true));
  });
  check(refused, `port ${localPort} still listens after close`);
});

await step("delete", ["create"], async () => {
  for (const name of Object.values(names)) await client.deleteSprite(name);
  const gone = await client.getSprite(names.main).then(
    () => undefined,
    (e) => e,
  );
  check(gone instanceof APIError && gone.statusCode === 404, `after delete: ${gone}`);
});

// Websockets the client left open must not keep this process alive.
process.exit(0);
