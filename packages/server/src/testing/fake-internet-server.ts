/**
 * The processes of the fake internet (see fake-internet.ts), run inside its network namespace:
 * a DNS server answering A queries for the configured names, an HTTP server on each name's
 * address (port 80: `GET /` says who it is, `GET /stream` sends a line every 50 ms until the
 * connection ends) and a control endpoint on the DNS address, port 8053, listing the queries seen.
 * Started as `node fake-internet-server.js '<json config>'`; prints `ready` once listening.
 */
import { createSocket } from "node:dgram";
import { createServer } from "node:http";
import * as dns from "dns-packet";

interface Config {
  dnsIp: string;
  ttlS: number;
  hosts: Record<string, string>;
}

const cfg = JSON.parse(process.argv[2] ?? "{}") as Config;
const queries: { name: string; type: string }[] = [];
const streams = new Set<import("node:http").ServerResponse>();

const udp = createSocket("udp4");
udp.on("message", (msg, rinfo) => {
  let q: dns.DecodedPacket;
  try {
    q = dns.decode(msg);
  } catch {
    return;
  }
  const question = q.questions?.[0];
  if (!question) return;
  const name = question.name.toLowerCase();
  queries.push({ name, type: String(question.type) });
  const ip = cfg.hosts[name];
  const answers: dns.Answer[] =
    ip && question.type === "A" ? [{ type: "A", name: question.name, ttl: cfg.ttlS, data: ip }] : [];
  const rcode = ip ? 0 : 3; // NXDOMAIN for names the fake internet does not have
  udp.send(
    dns.encode({
      type: "response",
      id: q.id ?? 0,
      flags: dns.RECURSION_AVAILABLE | rcode,
      questions: [question],
      answers,
    }),
    rinfo.port,
    rinfo.address,
  );
});

const listens: Promise<void>[] = [
  new Promise((resolve) => udp.bind(53, cfg.dnsIp, () => resolve())),
  new Promise((resolve) =>
    createServer((req, res) => {
      if (req.url === "/reset") queries.length = 0;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ queries, streams: streams.size }));
    }).listen(8053, cfg.dnsIp, () => resolve()),
  ),
];
for (const [name, ip] of Object.entries(cfg.hosts)) {
  const server = createServer((req, res) => {
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
  });
  listens.push(new Promise((resolve) => server.listen(80, ip, () => resolve())));
}
await Promise.all(listens);
process.stdout.write("ready\n");
