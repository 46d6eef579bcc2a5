/**
 * The processes of the fake internet (see fake-internet.ts), run inside its network namespace:
 * a DNS server answering A queries for the configured names (and A or AAAA queries for records
 * set later), an HTTP server on each name's address (port 80 and any extra ports: `GET /` says
 * who it is, `GET /stream` sends a line every 50 ms until the connection ends) and a control
 * endpoint on the DNS address, port 8053, listing the queries seen (`POST /records` sets records).
 * Started as `node fake-internet-server.js '<json config>'`; prints `ready` once listening.
 */
import { createSocket } from "node:dgram";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type * as dns from "dns-packet";
import { decodeQuery, encodeResponse } from "./dns-reply.js";

interface Config {
  dnsIp: string;
  ttlS: number;
  hosts: Record<string, string>;
  ports: number[];
}

const cfg = JSON.parse(process.argv[2] ?? "{}") as Config;
const queries: { name: string; type: string }[] = [];
/** Records set through the control endpoint: name → answer sets (see FakeInternet.setRecords). */
let records: Record<string, string[][]> = {};
/** How often each name was asked for each type (the records answer by this count). */
const asked = new Map<string, number>();

/** The answers of a record to its n-th query of this type (the last set repeats). */
function recordAnswers(name: string, type: string): string[] | undefined {
  const sets = records[name];
  if (!sets || sets.length === 0) return undefined;
  const key = `${name} ${type}`;
  const n = asked.get(key) ?? 0;
  asked.set(key, n + 1);
  const set = sets[Math.min(n, sets.length - 1)] ?? [];
  return set.filter((ip) => (type === "AAAA" ? ip.includes(":") : !ip.includes(":")));
}
const streams = new Set<ServerResponse>();

const udp = createSocket("udp4");
udp.on("message", (msg, rinfo) => {
  const q = decodeQuery(msg);
  if (!q) return;
  const question = q.questions?.[0];
  if (!question) return;
  const name = question.name.toLowerCase();
  queries.push({ name, type: String(question.type) });
  const ip = cfg.hosts[name];
  const extra = recordAnswers(name, String(question.type));
  const answers: dns.Answer[] =
    ip && question.type === "A" ? [{ type: "A", name: question.name, ttl: cfg.ttlS, data: ip }] : [];
  for (const data of extra ?? []) {
    answers.push({ type: question.type === "AAAA" ? "AAAA" : "A", name: question.name, ttl: 0, data });
  }
  const rcode = ip || extra ? 0 : 3; // NXDOMAIN for names the fake internet does not have
  udp.send(encodeResponse(q, [question], answers, rcode), rinfo.port, rinfo.address);
});

const listens: Promise<void>[] = [
  new Promise((resolve) => udp.bind(53, cfg.dnsIp, () => resolve())),
  new Promise((resolve) =>
    createServer((req, res) => {
      if (req.url === "/records" && req.method === "POST") {
        const parts: Buffer[] = [];
        req.on("data", (d: Buffer) => parts.push(d));
        req.on("end", () => {
          const set = JSON.parse(Buffer.concat(parts).toString() || "{}") as Record<string, string[][]>;
          records = Object.fromEntries(Object.entries(set).map(([n, sets]) => [n.toLowerCase(), sets]));
          asked.clear();
          res.end("{}");
        });
        return;
      }
      if (req.url === "/reset") queries.length = 0;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ queries, streams: streams.size }));
    }).listen(8053, cfg.dnsIp, () => resolve()),
  ),
];
for (const [name, ip] of Object.entries(cfg.hosts)) {
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === "/stream") {
      res.writeHead(200, { "content-type": "text/plain" });
      streams.add(res);
      const timer = setInterval(() => res.write(`tick ${Date.now()}\n`), 50);
      res.on("close", () => {
        clearInterval(timer);
        streams.delete(res);
      });
      return;
    }
    res.end(`hello from ${name}\n`);
  };
  for (const port of cfg.ports ?? [80]) {
    listens.push(new Promise((resolve) => createServer(handler).listen(port, ip, () => resolve())));
  }
}
await Promise.all(listens);
process.stdout.write("ready\n");
