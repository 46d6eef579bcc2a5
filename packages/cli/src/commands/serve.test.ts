// The CLI contract, through the real launcher bin/ums (testing/ums-cli.ts): every test spawns it as a
// user would, with a data dir of its own, and stops only the processes it started (by PID).

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { describe, it } from "node:test";
import { freePort } from "@ums/server/testing";
import {
  api,
  createPgDatabase,
  createToken,
  jsonLogLines,
  serve,
  sqliteBytes,
  TOKEN_RE,
  tempDir,
  ums,
  umsOk,
} from "../testing/ums-cli.js";

// Every test has its own data dir and port, so they run side by side.
describe("ums serve", { concurrency: 4 }, () => {
  it("serves CLI tokens, flags beat env, logs JSON to stderr, exits 0 on SIGTERM", async (t) => {
    const dir = await tempDir(t);
    const otherDir = await tempDir(t);
    const token = await createToken(dir, "acme");
    const port = await freePort();
    const server = await serve(
      t,
      port,
      ["--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--unit-host", "flag.example.test"],
      { UMS_DATA_DIR: otherDir, UMS_LISTEN: "not-an-address", UMS_UNIT_HOST: "env.example.test" },
    );

    const org = await api(server.url, "GET", "/v1/organization", token);
    assert.equal(org.status, 200);
    assert.equal(org.body.organization.slug, "acme");
    assert.equal(org.body.organization.max_sprites, 1000);

    const anonymous = await api(server.url, "GET", "/v1/organization");
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, "UMS_UNAUTHORIZED");
    const wrong = await api(server.url, "GET", "/v1/units", `ums_${"x".repeat(43)}`);
    assert.equal(wrong.status, 401);

    const unit = await api(server.url, "POST", "/v1/units", token, { name: "web" });
    assert.equal(unit.status, 201);
    assert.match(unit.body.url, new RegExp(`^http://web-[a-z0-9]{8}\\.flag\\.example\\.test:${port}$`));

    // With the server running the token is still nowhere in the database files (WAL included).
    const bytes = await sqliteBytes(dir);
    assert.ok(bytes.includes("acme"));
    assert.equal(bytes.includes(token), false);
    assert.equal(existsSync(join(otherDir, "ums.db")), false);

    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
    const stderr = server.stderr();
    assert.equal(stderr.includes(token), false, "the token leaked into the logs");
    const logs = jsonLogLines(stderr);
    const listening = logs.find((l) => l.msg === "ums listening");
    assert.ok(listening, stderr);
    assert.equal(listening.port, port);
    assert.equal(listening.dialect, "sqlite");
    assert.equal(listening.dataDir, dir);
    assert.equal(listening.level, 30);
    assert.equal(typeof listening.time, "number");
    assert.ok(logs.some((l) => l.msg === "request" && l.url === "/v1/units" && l.status === 201));
    assert.ok(logs.some((l) => l.msg === "shutting down" && l.signal === "SIGTERM"));
  });

  it("a token revoked with the CLI while the server runs answers 401 on its next request; SIGINT exits 0", async (t) => {
    const dir = await tempDir(t);
    const keep = await createToken(dir, "acme", "--name", "keep");
    const doomed = await createToken(dir, "acme", "--name", "doomed");
    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`]);

    assert.equal((await api(server.url, "GET", "/v1/units", doomed)).status, 200);
    assert.equal((await api(server.url, "GET", "/v1/units", keep)).status, 200);

    const rows = (await umsOk(["token", "list", "--data-dir", dir, "--json"]))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    const id = rows.find((r) => r.name === "doomed")?.id;
    assert.match(id, /^tok_/);
    assert.equal(await umsOk(["token", "revoke", id, "--data-dir", dir]), `revoked ${id}\n`);

    const refused = await api(server.url, "GET", "/v1/units", doomed);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.code, "UMS_UNAUTHORIZED");
    assert.match(refused.headers.get("www-authenticate") ?? "", /^Bearer .*error="invalid_token"/);
    assert.equal((await api(server.url, "GET", "/v1/units", keep)).status, 200);

    // Revoking an id that is not an active token is a usage error.
    const again = await ums(["token", "revoke", id, "--data-dir", dir]);
    assert.equal(again.code, 2, again.stderr);
    assert.equal(again.stderr, `ums: no active token with id '${id}'\n`);

    assert.deepEqual(await server.stop("SIGINT"), { code: 0, signal: null });
    assert.ok(jsonLogLines(server.stderr()).some((l) => l.msg === "shutting down" && l.signal === "SIGINT"));
  });

  it("org set-limits applies to a running server: limits are reported and the third unit is refused", async (t) => {
    const dir = await tempDir(t);
    const token = await createToken(dir, "acme");
    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`]);

    await umsOk([
      "org",
      "set-limits",
      "acme",
      "--max-units",
      "2",
      "--running-limit",
      "3",
      "--warm-limit",
      "4",
      "--data-dir",
      dir,
    ]);

    const list = await api(server.url, "GET", "/v1/units", token);
    assert.equal(list.status, 200);
    assert.equal(list.body.name, "acme");
    assert.equal(list.body.running_limit, 3);
    assert.equal(list.body.warm_limit, 4);
    const org = await api(server.url, "GET", "/v1/organization", token);
    assert.equal(org.body.organization.max_sprites, 2);
    assert.equal(org.body.organization.active_sprite_limit, 3);

    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "one" })).status, 201);
    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "two" })).status, 201);
    const third = await api(server.url, "POST", "/v1/units", token, { name: "three" });
    assert.equal(third.status, 403);
    assert.equal(third.body.code, "UMS_LIMIT_REACHED");
    assert.match(third.body.error, /\b2\b/);
    assert.equal((await api(server.url, "GET", "/v1/units/three", token)).status, 404);

    // Raising the limit from the CLI lets the next create through at once.
    await umsOk(["org", "set-limits", "acme", "--max-units", "3", "--data-dir", dir]);
    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "three" })).status, 201);
    const after = await api(server.url, "GET", "/v1/units", token);
    assert.deepEqual(
      after.body.sprites.map((u: { name: string }) => u.name),
      ["one", "three", "two"],
    );
    assert.equal(after.body.running_limit, 3);
    assert.equal(after.body.warm_limit, 4);

    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
  });

  it("reads UMS_DATA_DIR, UMS_LISTEN and UMS_UNIT_HOST; unit URLs are http://<name>-<8>.<unit_host>:<port>", async (t) => {
    const dir = await tempDir(t);
    const env = { UMS_DATA_DIR: dir };
    const token = (await umsOk(["token", "create", "--org", "envorg"], { env })).trim();
    assert.match(token, TOKEN_RE);
    assert.ok(existsSync(join(dir, "ums.db")));
    const port = await freePort();
    const server = await serve(t, port, [], {
      ...env,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_UNIT_HOST: "units.example.test",
    });

    const created = await api(server.url, "POST", "/v1/units", token, { name: "my-app2" });
    assert.equal(created.status, 201);
    assert.equal(created.body.organization, "envorg");
    const url: string = created.body.url;
    assert.match(url, new RegExp(`^http://my-app2-[a-z0-9]{8}\\.units\\.example\\.test:${port}$`));
    const got = await api(server.url, "GET", "/v1/units/my-app2", token);
    assert.equal(got.body.url, url);
    const other = await api(server.url, "POST", "/v1/units", token, { name: "other" });
    const random = (u: string) => /-([a-z0-9]{8})\./.exec(u)?.[1];
    assert.match(other.body.url, new RegExp(`^http://other-[a-z0-9]{8}\\.units\\.example\\.test:${port}$`));
    assert.notEqual(random(other.body.url), random(url));

    assert.deepEqual(await server.stop("SIGINT"), { code: 0, signal: null });
  });

  it("a bad --listen or UMS_LISTEN value exits 2 with a message naming the value", async (t) => {
    const dir = await tempDir(t);
    for (const value of ["nonsense", "127.0.0.1:70000"]) {
      const r = await ums(["serve", "--data-dir", dir, "--listen", value], { timeoutMs: 10_000 });
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.ok(r.stderr.includes(value), r.stderr);
    }
    const fromEnv = await ums(["serve", "--data-dir", dir], { env: { UMS_LISTEN: "localhost" }, timeoutMs: 10_000 });
    assert.equal(fromEnv.code, 2);
    assert.match(fromEnv.stderr, /'localhost'/);
  });

  it("a listen port already in use exits 1 naming the address", async (t) => {
    const dir = await tempDir(t);
    const holder: Server = createServer();
    await new Promise<void>((res) => holder.listen(0, "127.0.0.1", res));
    t.after(() => new Promise<void>((res) => holder.close(() => res())));
    const addr = holder.address();
    const port = typeof addr === "object" && addr ? addr.port : 0;
    const r = await ums(["serve", "--data-dir", dir, "--listen", `127.0.0.1:${port}`], { timeoutMs: 10_000 });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`EADDRINUSE.*127\\.0\\.0\\.1:${port}`));
  });

  const pgUrl = process.env.UMS_TEST_PG_URL;
  it("with UMS_DATABASE_URL=postgres://… the CLI and the server share PostgreSQL, and no ums.db is made", {
    skip: pgUrl ? false : "UMS_TEST_PG_URL is not set (scripts/test sets it)",
  }, async (t) => {
    assert.ok(pgUrl);
    const databaseUrl = await createPgDatabase();
    const dir = await tempDir(t);
    const env = { UMS_DATABASE_URL: databaseUrl };
    const token = await createToken(dir, "pg-org");
    // The token above went to SQLite in `dir`; the one below to PostgreSQL.
    const pgToken = (await umsOk(["token", "create", "--org", "pg-org", "--data-dir", dir], { env })).trim();
    assert.match(pgToken, TOKEN_RE);
    await rm(join(dir, "ums.db"));
    await rm(join(dir, "ums.db-wal"), { force: true });
    await rm(join(dir, "ums.db-shm"), { force: true });
    await umsOk(["org", "set-limits", "pg-org", "--max-units", "5", "--data-dir", dir], { env });

    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`], env);
    const org = await api(server.url, "GET", "/v1/organization", pgToken);
    assert.equal(org.status, 200);
    assert.equal(org.body.organization.max_sprites, 5);
    assert.equal((await api(server.url, "GET", "/v1/organization", token)).status, 401);
    assert.equal(existsSync(join(dir, "ums.db")), false);
    const listening = jsonLogLines(server.stderr()).find((l) => l.msg === "ums listening");
    assert.equal(listening?.dialect, "postgres");
    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
  });
});
