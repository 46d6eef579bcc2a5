// `ums services`, `ums service put|rm|restart|logs`, `ums url` (spec 4.6, 2.2).

import { type ServiceEvent, Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";
import { commandAfterDashDash } from "./exec.js";

const collect = (value: string, prev: string[]) => [...prev, value];

/** Service output as it was written: stdout to ours, stderr to ours, a line per event (spec 6.4). */
function printOutput(e: ServiceEvent): void {
  if (e.type === "stdout") process.stdout.write(`${e.data}\n`);
  else if (e.type === "stderr") process.stderr.write(`${e.data}\n`);
  else if (e.type === "error") process.stderr.write(`ums: service error: ${e.data}\n`);
}

export function servicesCommand(): Command {
  const cmd = withJson(withContext(new Command("services")))
    .description("a unit's services and their state")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .action(async (name: string | undefined, opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const list = await unit.services.list();
      if (opts.json) return printJson(list);
      process.stdout.write(
        table(
          ["SERVICE", "STATUS", "PID", "HTTP PORT", "COMMAND"],
          list.map((s) => [
            s.name,
            s.state?.status ?? "-",
            s.state?.pid ?? "-",
            s.http_port ?? "-",
            [s.cmd, ...s.args].join(" "),
          ]),
        ),
      );
    });
  return examples(cmd, ["ums services web", "ums services --json"]);
}

interface PutOpts {
  httpPort?: string;
  needs: string[];
  env: string[];
  dir?: string;
  json?: boolean;
}

export function serviceCommand(): Command {
  const svc = new Command("service").description("define, remove, restart a service and read its logs");

  withJson(withContext(svc.command("put")))
    .description("create or replace a service and start it: ums service put NAME SERVICE -- CMD [ARGS...]")
    .argument("<name>", "the unit")
    .argument("<service>", "the service's name")
    .argument("[cmd...]", "after '--': the command and its arguments")
    .option("--http-port <port>", "the port the unit's URL forwards to")
    .option("--needs <service>", "a service to start first (repeatable)", collect, [] as string[])
    .option("-e, --env <KEY=VALUE>", "an environment variable (repeatable)", collect, [] as string[])
    .option("-w, --dir <dir>", "working directory")
    .action(async (name: string, service: string, _cmd: string[], opts: PutOpts, self: Command) => {
      const argv = commandAfterDashDash(process.argv);
      if (!argv || argv.length === 0)
        throw new UsageError("put the command after '--': ums service put NAME SERVICE -- CMD");
      const env: Record<string, string> = {};
      for (const pair of opts.env) {
        const eq = pair.indexOf("=");
        if (eq <= 0) throw new UsageError(`--env must be KEY=VALUE, got '${pair}'`);
        env[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      let httpPort: number | undefined;
      if (opts.httpPort !== undefined) {
        httpPort = Number(opts.httpPort);
        if (!/^\d{1,5}$/.test(opts.httpPort) || httpPort < 1 || httpPort > 65535) {
          throw new UsageError(`--http-port must be a port 1-65535, got '${opts.httpPort}'`);
        }
      }
      const r = await resolveConnection(self);
      const unit = await Unit.connect(name, { client: r.client });
      const res = await unit.services.put(service, {
        cmd: argv[0] as string,
        args: argv.slice(1),
        needs: opts.needs,
        ...(Object.keys(env).length > 0 && { env }),
        ...(opts.dir !== undefined && { dir: opts.dir }),
        ...(httpPort !== undefined && { http_port: httpPort }),
      });
      if (opts.json) return printJson(res);
      process.stdout.write(`service ${res.name}: ${res.state?.status ?? "defined"}\n`);
    });

  withContext(svc.command("rm"))
    .description("stop and delete a service")
    .argument("<name>", "the unit")
    .argument("<service>", "the service")
    .action(async (name: string, service: string, _opts: unknown, self: Command) => {
      const r = await resolveConnection(self);
      await (await Unit.connect(name, { client: r.client })).services.remove(service);
      process.stdout.write(`removed service ${service}\n`);
    });

  withContext(svc.command("restart"))
    .description("stop the service if it runs, then start it; prints its first output")
    .argument("<name>", "the unit")
    .argument("<service>", "the service")
    .action(async (name: string, service: string, _opts: unknown, self: Command) => {
      const r = await resolveConnection(self);
      const events = await (await Unit.connect(name, { client: r.client })).services.restart(service, {
        durationMs: 2_000,
        onEvent: printOutput,
      });
      const exit = events.find((e) => e.type === "exit");
      process.stderr.write(
        exit && "exit_code" in exit ? `service ${service} exited with ${exit.exit_code}\n` : `restarted ${service}\n`,
      );
    });

  withContext(svc.command("logs"))
    .description("a service's log (stdout to stdout, stderr to stderr); -f follows it")
    .argument("<name>", "the unit")
    .argument("<service>", "the service")
    .option("-n, --lines <n>", "only the last n lines")
    .option("-f, --follow", "then print new lines as they come (until Ctrl-C)")
    .action(async (name: string, service: string, opts: { lines?: string; follow?: boolean }, self: Command) => {
      if (opts.lines !== undefined && !/^\d{1,7}$/.test(opts.lines)) {
        throw new UsageError(`--lines must be a whole number, got '${opts.lines}'`);
      }
      const r = await resolveConnection(self);
      await (await Unit.connect(name, { client: r.client })).services.logs(service, {
        lines: opts.lines === undefined ? undefined : Number(opts.lines),
        followMs: opts.follow ? 24 * 3_600_000 : 0,
        timeoutMs: opts.follow ? 0 : undefined,
        onEvent: printOutput,
      });
    });

  return examples(svc, [
    "ums service put web app --http-port 8080 -- python3 -m http.server 8080",
    "ums service logs web app -f",
    "ums service restart web app",
    "ums service rm web app",
  ]);
}

export function urlCommand(): Command {
  const cmd = withJson(withContext(new Command("url")))
    .description("a unit's URL; --public opens it to anyone, --private requires a token again")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .option("--public", "anyone may reach the URL")
    .option("--private", "only requests with a token of the organization")
    .action(async (name: string | undefined, opts: { public?: boolean; private?: boolean; json?: boolean }, self) => {
      if (opts.public && opts.private) throw new UsageError("--public or --private, not both");
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      if (opts.public) await unit.updateUrlSettings({ auth: "public" });
      if (opts.private) await unit.updateUrlSettings({ auth: "unit" });
      const auth = unit.urlSettings?.auth ?? "unit";
      if (opts.json) return printJson({ url: unit.url, auth });
      process.stdout.write(`${unit.url}${auth === "public" ? "  (public)" : ""}\n`);
    });
  return examples(cmd, ["ums url web", "ums url web --public"]);
}
