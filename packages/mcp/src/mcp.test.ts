// Issue #13 part 2: the MCP server through the official MCP client, over stdio (`ums mcp` as an
// agent host spawns it) and over streamable HTTP (`/v1/mcp` of `ums serve`), against a real server
// with real units: list the tools, call each, the error paths, and auth.

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { cleanupStoppedServer, prepareServe, type ServeProcess, UMS_BIN } from "@ums/server/testing";

type Result = Awaited<ReturnType<Client["callTool"]>>;
const textOf = (r: Result) => (r.content as { type: string; text: string }[]).map((c) => c.text).join("");

const TOOLS = [
  "create_checkpoint",
  "create_template",
  "create_unit",
  "delete_unit",
  "fork_unit",
  "get_unit_url",
  "get_unit_usage",
  "list_checkpoints",
  "list_events",
  "list_files",
  "list_services",
  "list_templates",
  "list_units",
  "read_file",
  "restore_checkpoint",
  "run_command",
  "service_logs",
  "set_network_policy",
  "start_service",
  "stop_service",
  "write_file",
];

describe("the ums MCP server", { timeout: 300_000 }, () => {
  let s: ServeProcess;
  let home: string;
  let stdio: Client;
  before(async () => {
    s = await prepareServe({ name: "mcp", org: "agents" });
    await s.start();
    home = await mkdtemp(join(tmpdir(), "ums-mcp-home-"));
    stdio = new Client({ name: "ums-test", version: "1.0.0" });
    await stdio.connect(
      new StdioClientTransport({
        command: UMS_BIN,
        args: ["mcp"],
        env: { PATH: process.env.PATH ?? "", HOME: home, UMS_URL: s.base, UMS_TOKEN: s.token },
        stderr: "pipe",
      }),
    );
  });
  after(async () => {
    await stdio?.close().catch(() => {});
    await s?.close(["mcp-a", "mcp-b", "mcp-c"], cleanupStoppedServer);
    if (home) await rm(home, { recursive: true, force: true });
  });

  const call = (c: Client, name: string, args: Record<string, unknown>) => c.callTool({ name, arguments: args });
  const ok = async (c: Client, name: string, args: Record<string, unknown>) => {
    const r = await call(c, name, args);
    assert.ok(!r.isError, `${name}: ${textOf(r)}`);
    return textOf(r);
  };

  it("over stdio: lists every tool with a described JSON-schema input", async () => {
    const { tools } = await stdio.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    for (const t of tools) {
      assert.ok((t.description ?? "").length > 20, `${t.name} has a description`);
      assert.equal(t.inputSchema.type, "object");
    }
  });

  it("over stdio: a unit's life through the tools", async () => {
    assert.match(await ok(stdio, "create_unit", { name: "mcp-a" }), /"name": "mcp-a"/);
    const run = await ok(stdio, "run_command", { unit: "mcp-a", command: "echo hello; echo oops >&2; exit 3" });
    assert.match(run, /^exit code: 3\n--- stdout ---\nhello\n\n--- stderr ---\noops\n/);
    // Long output is cut, start and end kept, with a note.
    const long = await ok(stdio, "run_command", { unit: "mcp-a", command: "seq 1 100000" });
    assert.match(long, /characters cut: the output was 588895 characters/);
    assert.match(long, /\n100000\n/);
    await ok(stdio, "write_file", { unit: "mcp-a", path: "/home/unit/notes/a.txt", content: "first\n" });
    assert.equal(await ok(stdio, "read_file", { unit: "mcp-a", path: "notes/a.txt" }), "first\n");
    assert.match(await ok(stdio, "list_files", { unit: "mcp-a", path: "/home/unit/notes" }), /"name": "a.txt"/);
    const res = await stdio.readResource({ uri: "ums://units/mcp-a/files/home/unit/notes/a.txt" });
    assert.equal((res.contents[0] as { text: string }).text, "first\n");

    await ok(stdio, "start_service", {
      unit: "mcp-a",
      name: "ticker",
      cmd: "sh",
      args: ["-c", "echo tick; sleep 600"],
    });
    assert.match(await ok(stdio, "list_services", { unit: "mcp-a" }), /"name": "ticker"/);
    let logs = "";
    for (let i = 0; i < 40 && !logs.includes("tick"); i++) {
      logs = await ok(stdio, "service_logs", { unit: "mcp-a", name: "ticker" });
      if (!logs.includes("tick")) await new Promise((r) => setTimeout(r, 250));
    }
    assert.match(logs, /tick/);
    await ok(stdio, "stop_service", { unit: "mcp-a", name: "ticker" });

    const cp = JSON.parse(await ok(stdio, "create_checkpoint", { unit: "mcp-a", comment: "first" })) as { id: string };
    await ok(stdio, "write_file", { unit: "mcp-a", path: "notes/a.txt", content: "second\n" });
    assert.match(await ok(stdio, "list_checkpoints", { unit: "mcp-a" }), new RegExp(`"id": "${cp.id}"`));
    await ok(stdio, "restore_checkpoint", { unit: "mcp-a", checkpoint: cp.id });
    assert.equal(await ok(stdio, "read_file", { unit: "mcp-a", path: "notes/a.txt" }), "first\n");
    assert.match(await ok(stdio, "fork_unit", { unit: "mcp-a", new_name: "mcp-b", checkpoint: cp.id }), /mcp-a@/);
    assert.equal(await ok(stdio, "read_file", { unit: "mcp-b", path: "notes/a.txt" }), "first\n");
    // Templates: one published from the checkpoint, a unit started from it.
    assert.match(await ok(stdio, "create_template", { name: "mcp-t", unit: "mcp-a", checkpoint: cp.id }), /mcp-a@/);
    assert.match(await ok(stdio, "list_templates", {}), /"name": "mcp-t"/);
    assert.match(await ok(stdio, "create_unit", { name: "mcp-c", template: "mcp-t" }), /"name": "mcp-c"/);
    assert.equal(await ok(stdio, "read_file", { unit: "mcp-c", path: "notes/a.txt" }), "first\n");
    assert.match(await ok(stdio, "get_unit_url", { unit: "mcp-a" }), /"url": "http:\/\/mcp-a-/);
    const usage = JSON.parse(await ok(stdio, "get_unit_usage", { unit: "mcp-a", window: "24h" }));
    assert.equal(usage.window, "24h");
    assert.equal(usage.step_seconds ?? usage.stepSeconds, 300);
    const policy = await ok(stdio, "set_network_policy", {
      unit: "mcp-a",
      rules: [{ action: "allow", domain: "api.example.com" }],
    });
    assert.match(policy, /api\.example\.com/);
    assert.match(await ok(stdio, "list_units", { prefix: "mcp-" }), /"name": "mcp-b"/);
    assert.match(await ok(stdio, "delete_unit", { name: "mcp-b" }), /deleted/);
    // Issue #17: the unit's life as events, oldest first.
    const events = JSON.parse(await ok(stdio, "list_events", { unit: "mcp-b" })).events;
    assert.deepEqual(
      events.map((e: { type: string }) => e.type).filter((t: string) => t === "unit.forked" || t === "unit.deleted"),
      ["unit.forked", "unit.deleted"],
    );
    const first = JSON.parse(await ok(stdio, "list_events", { unit: "mcp-b", limit: 1 }));
    assert.equal(first.events[0].type, "unit.forked");
    assert.equal(first.more, true);
    const rest = JSON.parse(await ok(stdio, "list_events", { unit: "mcp-b", since: first.next_since }));
    assert.equal(rest.events.at(-1).type, "unit.deleted");
    assert.equal((await call(stdio, "list_events", { since: "not-an-id" })).isError, true);
  });

  it("errors come back as tool errors with the server's code", async () => {
    const r = await call(stdio, "run_command", { unit: "no-such-unit", command: "true" });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /^UMS_UNIT_NOT_FOUND: /);
    const bad = await call(stdio, "create_unit", { name: "Not A Name" });
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /UMS_/);
    // Input that fails the tool's schema is refused by the MCP server itself.
    const wrong = await call(stdio, "run_command", { unit: "mcp-a" }).catch((e: Error) => e);
    assert.ok(wrong instanceof Error || wrong.isError, "a missing argument is an error");
  });

  it("over HTTP at /v1/mcp with the token; without one, 401", async () => {
    const http = new Client({ name: "ums-test-http", version: "1.0.0" });
    await http.connect(
      new StreamableHTTPClientTransport(new URL(`${s.base}/v1/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${s.token}` } },
      }),
    );
    try {
      const { tools } = await http.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      assert.match(await ok(http, "list_units", {}), /"name": "mcp-a"/);
      const run = await ok(http, "run_command", { unit: "mcp-a", command: "cat notes/a.txt" });
      assert.match(run, /^exit code: 0\n--- stdout ---\nfirst\n/);
      const r = await call(http, "read_file", { unit: "ghost", path: "x" });
      assert.equal(r.isError, true);
      assert.match(textOf(r), /^UMS_UNIT_NOT_FOUND/);
    } finally {
      await http.close();
    }
    const anon = await fetch(`${s.base}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.equal(anon.status, 401);
    assert.equal(((await anon.json()) as { code: string }).code, "UMS_UNAUTHORIZED");
  });
});
