// The ums MCP server (issue #13 part 2): a unit's life as tools an AI agent calls, on the official
// TypeScript MCP SDK, over the ums SDK. One definition, two transports: stdio (`ums mcp`) and
// streamable HTTP (`/v1/mcp` on `ums serve`).

import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { EVENT_TYPES, Events, type UmsClient, UmsError, Unit } from "@ums/sdk";
import { z } from "zod";

export const MCP_SERVER_NAME = "ums";
export const MCP_SERVER_VERSION = "0.1.0";

/** The most of a command's output (each of stdout and stderr) returned to the agent. */
export const MAX_OUTPUT_CHARS = 32 * 1024;
/** The most of a file returned by read_file / a resource read. */
export const MAX_FILE_CHARS = 256 * 1024;

function text(value: string): CallToolResult {
  return { content: [{ type: "text", text: value }] };
}

function json(value: unknown): CallToolResult {
  return text(JSON.stringify(value, null, 2));
}

/** A failure the agent reads: the server's code and message (a tool error, not a protocol error). */
function failure(err: unknown): CallToolResult {
  const message =
    err instanceof UmsError && !err.message.startsWith(`${err.code}:`)
      ? `${err.code}: ${err.message}`
      : err instanceof Error
        ? err.message
        : String(err);
  return { isError: true, content: [{ type: "text", text: message }] };
}

/** Keeps the start and the end of a long output, with a note of what was cut. */
export function capOutput(s: string, max = MAX_OUTPUT_CHARS): string {
  if (s.length <= max) return s;
  const head = s.slice(0, Math.floor(max / 2));
  const tail = s.slice(s.length - Math.floor(max / 2));
  return `${head}\n[… ${s.length - head.length - tail.length} characters cut: the output was ${s.length} characters …]\n${tail}`;
}

const unitName = z.string().min(1).max(63).describe("The unit's name");
const filePath = z.string().min(1).max(4096).describe("A path in the unit (absolute, or relative to /home/unit)");

/** Wraps a tool body: its errors come back as tool errors carrying the server's code. */
async function call(fn: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (err) {
    return failure(err);
  }
}

/** An MCP server whose tools act for the client's token (its organization). */
export function createMcpServer(client: UmsClient): McpServer {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: MCP_SERVER_VERSION },
    {
      instructions:
        "ums units are persistent Linux machines. Create one (create_unit), run commands in it (run_command), read and write its files, run services, save and restore its state with checkpoints, and reach it at its URL.",
    },
  );
  const unit = (name: string) => Unit.connect(name, { client });

  server.registerTool(
    "list_units",
    {
      title: "List units",
      description: "The organization's units with their status (cold, warm, running) and URL.",
      inputSchema: { prefix: z.string().max(63).optional().describe("Only units whose name starts with this") },
      annotations: { readOnlyHint: true },
    },
    ({ prefix }) =>
      call(async () => {
        const units = [];
        for await (const u of Unit.list({ client, ...(prefix && { prefix }) })) {
          units.push({ name: u.name, status: u.status, url: u.url, labels: u.labels });
          if (units.length >= 500) break;
        }
        return json(units);
      }),
  );

  server.registerTool(
    "create_unit",
    {
      title: "Create a unit",
      description:
        "Creates a unit (a persistent Linux machine; it boots on first use). With from_unit and from_checkpoint, a fork of that checkpoint; with template, a unit from an organization template (list_templates).",
      inputSchema: {
        name: unitName,
        public: z.boolean().optional().describe("Anyone may reach its URL (default: only with a token)"),
        from_unit: z.string().max(63).optional(),
        from_checkpoint: z.string().max(64).optional(),
        template: z.string().max(63).optional().describe("Start from this organization template"),
      },
    },
    ({ name, public: pub, from_unit, from_checkpoint, template }) =>
      call(async () => {
        const u = await Unit.create(name, {
          client,
          ...(pub && { urlSettings: { auth: "public" } }),
          ...(from_unit && { from: { unit: from_unit, checkpoint: from_checkpoint ?? "latest" } }),
          ...(template && { template }),
        });
        return json({ name: u.name, status: u.status, url: u.url });
      }),
  );

  server.registerTool(
    "delete_unit",
    {
      title: "Delete a unit",
      description: "Deletes a unit with its files, checkpoints and services. It cannot be undone.",
      inputSchema: { name: unitName },
      annotations: { destructiveHint: true },
    },
    ({ name }) =>
      call(async () => {
        await Unit.delete(name, { client });
        return text(`unit '${name}' deleted`);
      }),
  );

  server.registerTool(
    "run_command",
    {
      title: "Run a command",
      description: `Runs a shell command (bash -c) in the unit to its end and returns its exit code, stdout and stderr (each cut to ${MAX_OUTPUT_CHARS} characters, start and end kept, with a note). A non-zero exit is a result, not an error.`,
      inputSchema: {
        unit: unitName,
        command: z.string().min(1).max(65536).describe("The script, run with bash -c"),
        timeout_seconds: z.number().int().min(1).max(3600).optional().describe("Default 120"),
        workdir: z.string().max(4096).optional(),
      },
    },
    ({ unit: name, command, timeout_seconds, workdir }) =>
      call(async () => {
        const u = await unit(name);
        const r = await u.commands.run(command, {
          timeoutMs: (timeout_seconds ?? 120) * 1000,
          ...(workdir && { cwd: workdir }),
        });
        return text(
          `exit code: ${r.exitCode}\n--- stdout ---\n${capOutput(r.stdout)}\n--- stderr ---\n${capOutput(r.stderr)}`,
        );
      }),
  );

  server.registerTool(
    "read_file",
    {
      title: "Read a file",
      description: `A text file of the unit (cut to ${MAX_FILE_CHARS} characters, with a note).`,
      inputSchema: { unit: unitName, path: filePath },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name, path }) =>
      call(async () => text(capOutput(await (await unit(name)).files.read(path), MAX_FILE_CHARS))),
  );

  server.registerTool(
    "write_file",
    {
      title: "Write a file",
      description: "Writes a text file in the unit (its directories are made), replacing what was there.",
      inputSchema: { unit: unitName, path: filePath, content: z.string().max(16 * 1024 * 1024) },
    },
    ({ unit: name, path, content }) =>
      call(async () => {
        const r = await (await unit(name)).files.write(path, content, { mkdirParents: true });
        return json(r);
      }),
  );

  server.registerTool(
    "list_files",
    {
      title: "List a directory",
      description: "The entries of a directory in the unit: name, type, size, modified time.",
      inputSchema: { unit: unitName, path: filePath },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name, path }) => call(async () => json(await (await unit(name)).files.list(path))),
  );

  server.registerTool(
    "get_unit_usage",
    {
      title: "A unit's resource usage",
      description:
        "What the unit used while it ran: CPU (cores), memory (bytes, peak, limit), disk (bytes, quota), network (bytes per second in and out) and processes. window 1h: a sample every 10 s; 24h and 7d: 5-minute averages. Oldest first; only the last 60 samples.",
      inputSchema: { unit: unitName, window: z.enum(["1h", "24h", "7d"]).default("1h") },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name, window }) =>
      call(async () => {
        const u = await (await unit(name)).metrics({ window });
        return json({ ...u, samples: u.samples.slice(-60) });
      }),
  );

  server.registerTool(
    "start_service",
    {
      title: "Start a service",
      description:
        "Defines (or replaces) a service, a process the unit keeps running and restarts, and starts it. http_port makes it the target of the unit's URL.",
      inputSchema: {
        unit: unitName,
        name: z.string().min(1).max(63),
        cmd: z.string().min(1).max(4096).describe("The program"),
        args: z.array(z.string().max(4096)).max(256).optional(),
        http_port: z.number().int().min(1).max(65535).optional(),
      },
    },
    ({ unit: name, name: service, cmd, args, http_port }) =>
      call(async () => {
        const s = await (await unit(name)).services.put(service, {
          cmd,
          ...(args && { args }),
          ...(http_port && { http_port }),
        });
        return json(s);
      }),
  );

  server.registerTool(
    "stop_service",
    {
      title: "Stop a service",
      description: "Stops a service and removes its definition.",
      inputSchema: { unit: unitName, name: z.string().min(1).max(63) },
    },
    ({ unit: name, name: service }) =>
      call(async () => {
        await (await unit(name)).services.remove(service);
        return text(`service '${service}' stopped and removed`);
      }),
  );

  server.registerTool(
    "service_logs",
    {
      title: "A service's log",
      description: `The last lines of a service's output (cut to ${MAX_OUTPUT_CHARS} characters).`,
      inputSchema: {
        unit: unitName,
        name: z.string().min(1).max(63),
        lines: z.number().int().min(1).max(10000).optional().describe("Default 200"),
      },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name, name: service, lines }) =>
      call(async () => {
        const events = await (await unit(name)).services.logs(service, { lines: lines ?? 200 });
        const out = events
          .map((e) => (e as { data?: string }).data ?? "")
          .filter(Boolean)
          .join("");
        return text(capOutput(out || "(no output yet)"));
      }),
  );

  server.registerTool(
    "list_services",
    {
      title: "List services",
      description: "The unit's services and their state.",
      inputSchema: { unit: unitName },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name }) => call(async () => json(await (await unit(name)).services.list())),
  );

  server.registerTool(
    "create_checkpoint",
    {
      title: "Create a checkpoint",
      description: "Saves the unit's whole state (files, services, policies) in milliseconds; returns its id.",
      inputSchema: { unit: unitName, comment: z.string().max(1000).optional() },
    },
    ({ unit: name, comment }) =>
      call(async () => json(await (await unit(name)).checkpoints.create(comment ? { comment } : {}))),
  );

  server.registerTool(
    "list_checkpoints",
    {
      title: "List checkpoints",
      description: "The unit's checkpoints, the active one marked.",
      inputSchema: { unit: unitName },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name }) => call(async () => json(await (await unit(name)).checkpoints.list())),
  );

  server.registerTool(
    "restore_checkpoint",
    {
      title: "Restore a checkpoint",
      description: "Puts the unit back to a checkpoint; the current state is saved first as a new checkpoint.",
      inputSchema: { unit: unitName, checkpoint: z.string().min(1).max(64) },
    },
    ({ unit: name, checkpoint }) => call(async () => json(await (await unit(name)).checkpoints.restore(checkpoint))),
  );

  server.registerTool(
    "fork_unit",
    {
      title: "Fork a unit",
      description: "A new unit from a checkpoint of another (a new checkpoint of it is taken when none is named).",
      inputSchema: { unit: unitName, new_name: unitName, checkpoint: z.string().max(64).optional() },
    },
    ({ unit: name, new_name, checkpoint }) =>
      call(async () => {
        const cp = checkpoint ?? (await (await unit(name)).checkpoints.create({ comment: `fork to ${new_name}` })).id;
        const u = await Unit.create(new_name, { client, from: { unit: name, checkpoint: cp } });
        return json({ name: u.name, from: `${name}@${cp}`, url: u.url });
      }),
  );

  server.registerTool(
    "create_template",
    {
      title: "Publish a template",
      description:
        "Publishes a unit's checkpoint (its files, services and policies) as an organization template that create_unit can start units from (a new checkpoint of the unit is taken when none is named).",
      inputSchema: {
        name: unitName.describe("The template's name"),
        unit: unitName,
        checkpoint: z.string().max(64).optional(),
        description: z.string().max(1000).optional(),
      },
    },
    ({ name, unit: from, checkpoint, description }) =>
      call(async () => {
        const cp = checkpoint ?? (await (await unit(from)).checkpoints.create({ comment: `template ${name}` })).id;
        const t = await client.templates.create(name, { unit: from, checkpoint: cp, description });
        return json({ name: t.name, from: `${from}@${cp}`, description: t.description });
      }),
  );

  server.registerTool(
    "list_templates",
    {
      title: "List templates",
      description: "The organization's templates, which create_unit can start units from.",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    () =>
      call(async () =>
        json(
          (await client.templates.list()).map((t) => ({
            name: t.name,
            description: t.description,
            from: `${t.source.unit}@${t.source.checkpoint}`,
          })),
        ),
      ),
  );

  server.registerTool(
    "get_unit_url",
    {
      title: "A unit's URL",
      description: "The unit's URL (its port 8080, or the service with an http_port) and who may reach it.",
      inputSchema: { unit: unitName },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name }) =>
      call(async () => {
        const u = await unit(name);
        return json({ url: u.url, auth: u.urlSettings?.auth ?? "unit" });
      }),
  );

  server.registerTool(
    "set_network_policy",
    {
      title: "Set the network policy",
      description:
        'The domains the unit may reach, as ordered rules ({"action":"allow"|"deny","domain":"api.example.com" or "*.example.com" or "*"}); an empty list lifts every restriction.',
      inputSchema: {
        unit: unitName,
        rules: z.array(z.object({ action: z.enum(["allow", "deny"]), domain: z.string().min(1).max(253) })).max(1000),
      },
    },
    ({ unit: name, rules }) => call(async () => json(await (await unit(name)).policies.setNetwork(rules))),
  );

  server.registerTool(
    "list_events",
    {
      title: "List lifecycle events",
      description:
        "The organization's unit lifecycle events (created, booted, woken, warmed, cooled, checkpointed, restored, forked, deleted, service crashed/restarted, policy changed, limit reached), oldest first. Pass the last event's id as since to get only newer ones.",
      inputSchema: {
        unit: z.string().max(63).optional().describe("Only this unit's events"),
        types: z.array(z.enum(EVENT_TYPES)).max(16).optional().describe("Only these event types"),
        since: z.string().max(64).optional().describe("Only the events after this event id (evt_…)"),
        limit: z.number().int().min(1).max(500).optional().describe("At most this many (default 100)"),
      },
      annotations: { readOnlyHint: true },
    },
    ({ unit: name, types, since, limit }) =>
      call(async () => {
        const page = await new Events({ client }).list({
          ...(name && { unit: name }),
          ...(types && { types }),
          ...(since && { since }),
          maxResults: limit ?? 100,
        });
        return json({
          events: page.events.map((e) => ({ ...e, time: e.time.toISOString() })),
          more: page.hasMore,
          next_since: page.events.at(-1)?.id ?? since ?? null,
        });
      }),
  );

  // A unit's files as resources: ums://units/{name}/files/{path} (the path without its leading /).
  server.registerResource(
    "unit-file",
    new ResourceTemplate("ums://units/{name}/files/{+path}", { list: undefined }),
    { title: "A file of a unit", description: "A text file in a unit", mimeType: "text/plain" },
    async (uri, vars) => {
      const name = String(vars.name);
      const path = `/${String(vars.path)}`;
      const content = await (await unit(name)).files.read(path);
      return { contents: [{ uri: uri.href, mimeType: "text/plain", text: capOutput(content, MAX_FILE_CHARS) }] };
    },
  );
  return server;
}
