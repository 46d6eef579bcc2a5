import { execHttp } from "./exec-client.js";

/**
 * For the tunnel tests and bench: a TCP server that runs INSIDE a unit (python3 of the test image),
 * on 0.0.0.0:<port>, one thread per connection, in the mode its first argument names:
 * - `echo`: sends back every byte as it arrives; at the client's end of stream it sends
 *   `eof after <n> bytes\n` and closes (a half-close answered);
 * - `source`: sends zeros until the client closes (the bench's download);
 * - `sink`: reads and counts until the client's end of stream, then sends `<n>\n` and closes (upload).
 * It writes its pid to /tmp/tcp-<port>.pid once it listens.
 */
export const TCP_SERVER = String.raw`
import os, socket, sys, threading
mode, port = sys.argv[1], int(sys.argv[2])
def echo(c):
    n = 0
    while True:
        d = c.recv(262144)
        if not d: break
        n += len(d); c.sendall(d)
    c.sendall(b"eof after %d bytes\n" % n)
def source(c):
    buf = bytes(1 << 20)
    try:
        while True: c.sendall(buf)
    except OSError: pass
def sink(c):
    n, buf = 0, bytearray(1 << 20)
    while True:
        k = c.recv_into(buf)
        if not k: break
        n += k
    c.sendall(b"%d\n" % n)
def serve(c):
    try: {"echo": echo, "source": source, "sink": sink}[mode](c)
    except OSError: pass
    finally: c.close()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port)); s.listen(256)
open("/tmp/tcp-%d.pid" % port, "w").write(str(os.getpid()))
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

/**
 * Starts TCP_SERVER in `mode` on `port` in the unit, in the background (its own session, so it
 * outlives the exec); resolves with its pid once it listens.
 */
export async function startTcpServer(
  baseUrl: string,
  token: string,
  unit: string,
  mode: "echo" | "source" | "sink",
  port: number,
): Promise<number> {
  const w = await execHttp(baseUrl, token, unit, ["sh", "-c", "cat > /tmp/tcp-server.py"], { stdin: TCP_SERVER });
  if (w.exitCode !== 0) throw new Error(`writing the server failed: ${w.stderr}`);
  const r = await execHttp(baseUrl, token, unit, [
    "sh",
    "-c",
    `rm -f /tmp/tcp-${port}.pid; setsid nohup python3 /tmp/tcp-server.py ${mode} ${port} </dev/null >/tmp/tcp-${port}.log 2>&1 &`,
  ]);
  if (r.exitCode !== 0) throw new Error(`starting the server failed: ${r.stderr}`);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const pid = await execHttp(baseUrl, token, unit, ["sh", "-c", `cat /tmp/tcp-${port}.pid 2>/dev/null`]);
    const text = pid.stdout.toString().trim();
    if (/^\d+$/.test(text)) return Number(text);
    if (Date.now() > deadline) throw new Error(`the TCP server did not start listening on ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops a server that startTcpServer started (SIGKILL: its port closes at once). */
export async function stopTcpServer(baseUrl: string, token: string, unit: string, pid: number): Promise<void> {
  await execHttp(baseUrl, token, unit, ["kill", "-9", String(pid)]);
}
