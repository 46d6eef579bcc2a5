/**
 * Test edge: a small HTTP client run inside a unit (by the unit's own node) that makes the
 * requests it is given against the gateway and prints their answers as JSON. node:http sends a
 * path exactly as given (fetch would resolve `..` and `%2e%2e` before sending).
 */
export const GATEWAY_CLIENT = `
import http from "node:http";
const [base, spec] = [new URL(process.argv[2]), JSON.parse(process.argv[3])];
const agent = new http.Agent({ keepAlive: true });
const one = (r) => new Promise((resolve) => {
  const body = r.bodyBytes ? Buffer.alloc(r.bodyBytes, 7) : r.body;
  const req = http.request({ host: base.hostname, port: base.port, path: r.path, method: r.method ?? "GET", headers: r.headers ?? {}, agent }, (res) => {
    const parts = [];
    res.on("data", (d) => parts.push(d));
    res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(parts).toString() }));
  });
  req.on("error", (err) => resolve({ status: 0, headers: {}, text: String(err) }));
  req.end(body);
});
const out = [];
for (const r of spec) out.push(await one(r));
agent.destroy();
process.stdout.write(JSON.stringify(out));
`;
