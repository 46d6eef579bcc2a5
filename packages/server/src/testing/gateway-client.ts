/**
 * Test edge: a small HTTP client run inside a unit (by the unit's own node) that makes the
 * requests it is given against the gateway, one after the other on one kept-alive connection
 * while it lasts, and prints their answers as JSON (with the number of the connection each went
 * on). node:http sends a path exactly as given (fetch would resolve `..` and `%2e%2e` before sending).
 */
export const GATEWAY_CLIENT = `
import http from "node:http";
const [base, spec] = [new URL(process.argv[2]), JSON.parse(process.argv[3])];
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const sockets = new Map();
const one = (r) => new Promise((resolve) => {
  const body = r.bodyBytes ? Buffer.alloc(r.bodyBytes, 7) : r.body;
  const req = http.request({ host: base.hostname, port: base.port, path: r.path, method: r.method ?? "GET", headers: r.headers ?? {}, agent }, (res) => {
    const parts = [];
    res.on("data", (d) => parts.push(d));
    res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(parts).toString(), socket: sockets.get(req.socket) }));
  });
  req.on("socket", (s) => sockets.has(s) || sockets.set(s, sockets.size + 1));
  if (r.timeoutMs) req.setTimeout(r.timeoutMs, () => req.destroy(new Error("no answer in time")));
  req.on("error", (err) => resolve({ status: 0, headers: {}, text: String(err) }));
  req.end(body);
});
const out = [];
for (const r of spec) out.push(await one(r));
agent.destroy();
process.stdout.write(JSON.stringify(out));
`;
