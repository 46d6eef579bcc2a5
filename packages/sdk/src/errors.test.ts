import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as sdk from "./index.js";
import {
  AuthenticationError,
  ConflictError,
  errorFromResponse,
  LimitError,
  NotFoundError,
  NotImplementedError,
  ServerError,
  UmsClient,
  UmsError,
  Unit,
  ValidationError,
} from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

describe("server errors become the SDK's error classes (real ums server)", () => {
  let server: LaunchedServer;
  let client: UmsClient;

  before(async () => {
    server = await launchServer();
    client = new UmsClient({ baseUrl: server.baseUrl, token: await server.token("errors") });
  });
  after(async () => {
    await server?.stop();
  });

  it("creating a unit twice is a ConflictError (409, UMS_UNIT_EXISTS)", async () => {
    await Unit.create("twice", { client });
    await assert.rejects(Unit.create("twice", { client }), (err: unknown) => {
      assert.ok(err instanceof ConflictError, `got ${String(err)}`);
      assert.ok(err instanceof UmsError);
      assert.equal(err.status, 409);
      assert.equal(err.code, "UMS_UNIT_EXISTS");
      assert.equal(err.name, "ConflictError");
      assert.match(err.message, /twice/);
      return true;
    });
  });

  it("an invalid name is a ValidationError whose message and errors name `name`", async () => {
    await assert.rejects(Unit.create("Not_Valid", { client }), (err: unknown) => {
      assert.ok(err instanceof ValidationError, `got ${String(err)}`);
      assert.equal(err.status, 400);
      assert.equal(err.code, "UMS_VALIDATION");
      assert.equal(err.errors.length, 1, JSON.stringify(err.errors));
      assert.match(err.errors[0] ?? "", /^name: /);
      assert.match(err.message, /\bname\b/);
      return true;
    });
    await assert.rejects(Unit.connect("Not_Valid", { client }), NotFoundError, "no unit can have that name");
  });

  it("invalid url settings name the bad field", async () => {
    await assert.rejects(
      // @ts-expect-error: a value the types forbid, as plain JavaScript could send it.
      Unit.create("badsettings", { client, urlSettings: { auth: "everyone" } }),
      (err: unknown) => {
        assert.ok(err instanceof ValidationError, `got ${String(err)}`);
        assert.ok(
          err.errors.some((e) => e.startsWith("url_settings.auth")),
          JSON.stringify(err.errors),
        );
        return true;
      },
    );
  });

  it("an unknown upgrade version is a ValidationError naming `version`", async () => {
    const unit = await Unit.create("upgrader", { client });
    await assert.rejects(unit.upgrade("v9.9.9-rc9"), (err: unknown) => {
      assert.ok(err instanceof ValidationError, `got ${String(err)}`);
      assert.match(err.errors[0] ?? "", /^version: /);
      return true;
    });
  });

  it("a bad token is an AuthenticationError (401, UMS_UNAUTHORIZED)", async () => {
    const bad = new UmsClient({ baseUrl: server.baseUrl, token: "ums_not-a-real-token" });
    await assert.rejects(Unit.listPage({ client: bad }), (err: unknown) => {
      assert.ok(err instanceof AuthenticationError, `got ${String(err)}`);
      assert.equal(err.status, 401);
      assert.equal(err.code, "UMS_UNAUTHORIZED");
      return true;
    });
    await assert.rejects(Unit.create("never", { client: bad }), AuthenticationError);
    await assert.rejects(Unit.connect("never", { client }), NotFoundError, "the failed create made nothing");
  });

  it("another organization cannot see, change or delete the first one's unit", async () => {
    const mine = await Unit.create("private-unit", { client });
    const other = new UmsClient({ baseUrl: server.baseUrl, token: await server.token("other-org") });
    for (const attempt of [
      () => Unit.connect("private-unit", { client: other }),
      () => Unit.delete("private-unit", { client: other }),
    ]) {
      await assert.rejects(attempt(), (err: unknown) => {
        assert.ok(err instanceof NotFoundError, `got ${String(err)}`);
        assert.equal(err.code, "UMS_UNIT_NOT_FOUND");
        return true;
      });
    }
    const seen: string[] = [];
    for await (const u of Unit.list({ client: other })) seen.push(u.name);
    assert.deepEqual(seen, []);
    // The other organization may use the same name for its own unit.
    const theirs = await Unit.create("private-unit", { client: other });
    assert.notEqual(theirs.id, mine.id);
    assert.equal((await mine.refresh()).organization, "errors");
  });

  it("an organization at its unit limit gets a LimitError (403, UMS_LIMIT_REACHED)", async () => {
    const limited = new UmsClient({ baseUrl: server.baseUrl, token: await server.token("limited") });
    await server.setMaxUnits("limited", 1);
    await Unit.create("first", { client: limited });
    await assert.rejects(Unit.create("second", { client: limited }), (err: unknown) => {
      assert.ok(err instanceof LimitError, `got ${String(err)}`);
      assert.equal(err.status, 403);
      assert.equal(err.code, "UMS_LIMIT_REACHED");
      return true;
    });
  });

  it("an unknown route is a NotFoundError with UMS_ROUTE_NOT_FOUND", async () => {
    await assert.rejects(client.request("GET", "/v1/no-such-thing"), (err: unknown) => {
      assert.ok(err instanceof NotFoundError, `got ${String(err)}`);
      assert.equal(err.code, "UMS_ROUTE_NOT_FOUND");
      return true;
    });
  });

  it("a proxied path with nothing listening in the unit is a ServerError (502)", async () => {
    await Unit.create("proxied", { client });
    await assert.rejects(client.request("GET", "/v1/units/proxied/index.html"), (err: unknown) => {
      assert.ok(err instanceof ServerError, `got ${String(err)}`);
      assert.ok(!(err instanceof NotImplementedError));
      assert.equal(err.status, 502);
      assert.equal(err.code, "UMS_UNIT_NO_LISTENER");
      return true;
    });
  });
});

describe("errorFromResponse for answers that are not the API's error bodies", () => {
  it("uses the status when the body is not JSON (e.g. a proxy's 502 page)", () => {
    const err = errorFromResponse(502, "Bad Gateway", undefined, "<html>bad gateway</html>");
    assert.ok(err instanceof ServerError);
    assert.equal(err.status, 502);
    assert.equal(err.code, "HTTP_502");
    assert.match(err.message, /^HTTP 502 Bad Gateway: <html>bad gateway<\/html>$/);
  });

  it("the code wins over the status, and an unknown 4xx stays a plain UmsError", () => {
    assert.ok(errorFromResponse(400, "", { errors: ["body: x"], code: "UMS_BAD_JSON" }, "") instanceof ValidationError);
    const e = errorFromResponse(415, "", { error: "unsupported Content-Type", code: "UMS_UNSUPPORTED_MEDIA_TYPE" }, "");
    assert.equal(e.constructor, UmsError);
    assert.equal(e.code, "UMS_UNSUPPORTED_MEDIA_TYPE");
    assert.equal(e.message, "unsupported Content-Type");
  });

  it("every server code has its class; a code answered with several statuses goes by the status", () => {
    const classOf = (status: number, code: string) =>
      errorFromResponse(status, "", { error: "x", code }, "").constructor;
    assert.equal(classOf(409, "UMS_RUNNING_LIMIT"), ConflictError);
    assert.equal(classOf(404, "UMS_TASK_NOT_FOUND"), NotFoundError);
    assert.equal(classOf(401, "UMS_GATEWAY_UNAUTHORIZED"), AuthenticationError);
    assert.equal(classOf(504, "UMS_AGENT_TIMEOUT"), ServerError);
    assert.equal(classOf(403, "UMS_FORBIDDEN"), UmsError);
    assert.equal(classOf(400, "UMS_PROVIDER_FAILED"), ValidationError);
    assert.equal(classOf(502, "UMS_PROVIDER_FAILED"), ServerError);
  });

  it("every error class is named after itself", () => {
    const classes = Object.entries(sdk).filter(
      (e): e is [string, typeof UmsError] => typeof e[1] === "function" && e[1].prototype instanceof Error,
    );
    assert.ok(classes.length >= 11, classes.map(([name]) => name).join());
    for (const [name, Class] of classes) assert.equal(new Class("m", "c").name, name);
  });

  it("a 400 without a list still has `errors`", () => {
    const e = errorFromResponse(400, "Bad Request", { error: "nope", code: "X" }, "");
    assert.ok(e instanceof ValidationError);
    assert.deepEqual(e.errors, ["nope"]);
  });

  it("a filesystem error keeps its errno code and path; its status picks the class", () => {
    const missing = errorFromResponse(404, "", { error: "no such file", code: "ENOENT", path: "/home/unit/x" }, "");
    assert.ok(missing instanceof NotFoundError);
    assert.equal(missing.code, "ENOENT");
    assert.equal(missing.path, "/home/unit/x");
    const denied = errorFromResponse(400, "", { error: "permission denied", code: "EACCES", path: "/etc/x" }, "");
    assert.ok(denied instanceof ValidationError);
    assert.equal(denied.path, "/etc/x");
    assert.equal(errorFromResponse(404, "", { error: "x", code: "UMS_UNIT_NOT_FOUND" }, "").path, undefined);
  });
});
