// `ums proxy NAME PORT[:LOCAL_PORT]`: forwards a local port to a port inside the unit, one TCP
// tunnel websocket per connection (@ums/protocol tunnel.ts). Runs until Ctrl-C.

import { createServer, type Socket } from "node:net";
import { Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { examples, withContext } from "../user/options.js";

/** Bytes a tunnel may hold unsent before the local socket is paused. */
const HIGH_WATER = 4 * 1024 * 1024;

export function parsePorts(spec: string): { remote: number; local: number } {
  const m = /^(\d{1,5})(?::(\d{1,5}))?$/.exec(spec);
  const remote = Number(m?.[1]);
  const local = m?.[2] === undefined ? remote : Number(m[2]);
  if (!m || remote < 1 || remote > 65535 || local > 65535) {
    throw new UsageError(`'${spec}' must be PORT or PORT:LOCAL_PORT (1-65535; LOCAL_PORT 0 picks a free one)`);
  }
  return { remote, local };
}

export function proxyCommand(): Command {
  const cmd = withContext(new Command("proxy"))
    .description("forward a local port to a port inside a unit (until Ctrl-C)")
    .argument("<name>", "the unit")
    .argument("<ports>", "PORT[:LOCAL_PORT]: the unit's port, and the local one (default the same)", parsePorts)
    .option("--bind <address>", "the local address to listen on", "127.0.0.1")
    .option("--host <host>", "connect to this host as seen from inside the unit (default its loopback)")
    .action(
      async (
        name: string,
        ports: { remote: number; local: number },
        opts: { bind: string; host?: string },
        self: Command,
      ) => {
        const r = await resolveConnection(self);
        const unit = await Unit.connect(name, { client: r.client });
        const server = createServer((sock) => forward(unit, ports.remote, opts.host, sock));
        await new Promise<void>((resolve, reject) => {
          server.once("error", (err) =>
            reject(new UsageError(`cannot listen on ${opts.bind}:${ports.local}: ${err.message}`)),
          );
          server.listen(ports.local, opts.bind, () => resolve());
        });
        const addr = server.address();
        const local = typeof addr === "object" && addr ? addr.port : ports.local;
        process.stderr.write(`forwarding ${opts.bind}:${local} -> ${name}:${ports.remote} (Ctrl-C to stop)\n`);
        await new Promise<void>((resolve) => {
          process.once("SIGINT", resolve);
          process.once("SIGTERM", resolve);
        });
        server.close();
      },
    );
  return examples(cmd, ["ums proxy web 8080", "ums proxy web 5432:15432", "ums proxy web 80:0   # a free local port"]);
}

function forward(unit: Unit, port: number, host: string | undefined, sock: Socket): void {
  sock.pause();
  sock.on("error", () => {});
  unit.tunnel(port, { host }).then(
    (t) => {
      let waiting: NodeJS.Timeout | undefined;
      // The unit's bytes, with the local reader's pace: the websocket buffers while it is slow.
      t.onData((bytes) => sock.write(bytes));
      t.onClose(() => sock.end());
      sock.on("data", (bytes: Buffer) => {
        t.send(bytes);
        // Local bytes faster than the tunnel takes them: pause until half its buffer has gone.
        if (t.bufferedAmount > HIGH_WATER && waiting === undefined) {
          sock.pause();
          waiting = setInterval(() => {
            if (t.bufferedAmount >= HIGH_WATER / 2) return;
            clearInterval(waiting);
            waiting = undefined;
            sock.resume();
          }, 10);
        }
      });
      sock.on("end", () => t.end());
      sock.on("close", () => {
        clearInterval(waiting);
        t.close();
      });
      sock.resume();
    },
    (err: Error & { code?: string }) => {
      process.stderr.write(`ums: ${err.code ?? "UMS_SDK_CONNECTION"}: ${err.message}\n`);
      sock.destroy();
    },
  );
}
