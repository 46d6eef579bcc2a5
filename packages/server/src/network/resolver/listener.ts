import { createSocket, type Socket } from "node:dgram";
import { createServer, type Server, type Socket as TcpSocket } from "node:net";

/** Answers one query (raw DNS message); undefined: no answer at all. */
export type Handler = (query: Buffer) => Promise<Buffer | undefined>;

const TCP_IDLE_MS = 10_000;
/** Open TCP connections a unit may hold to its resolver; more are refused (a unit must not take the host's descriptors). */
const TCP_MAX_CONNECTIONS = 64;

/**
 * A unit's resolver endpoint: UDP and TCP on its gateway address, port 53 (RFC 1035 section 4.2;
 * RFC 7766: TCP with a two-byte length prefix, several queries per connection). Only the unit's
 * own address is answered (the firewall makes a source address trustworthy); anything else is
 * ignored.
 */
export class UnitListener {
  private udp: Socket | undefined;
  private tcp: Server | undefined;
  private readonly conns = new Set<TcpSocket>();

  constructor(
    private readonly bindIp: string,
    private readonly clientIp: string,
    private readonly handle: Handler,
    private readonly port = 53,
  ) {}

  async open(): Promise<void> {
    const udp = createSocket({ type: "udp4" });
    udp.on("message", (msg, rinfo) => {
      if (rinfo.address !== this.clientIp) return;
      this.handle(msg)
        .then((answer) => {
          // The unit may have stopped while the answer was on its way (a slow upstream): then its
          // socket is closed, and a send on it throws (issue #11: that exited the server).
          if (!answer || this.udp !== udp) return;
          udp.send(answer, rinfo.port, rinfo.address, () => {});
        })
        .catch(() => {});
    });
    udp.on("error", () => {});
    await new Promise<void>((resolve, reject) => {
      udp.once("error", reject);
      udp.bind({ address: this.bindIp, port: this.port, exclusive: true }, () => {
        udp.off("error", reject);
        resolve();
      });
    });
    this.udp = udp;
    const tcp = createServer((sock) => {
      if (sock.remoteAddress !== this.clientIp) return sock.destroy();
      this.conns.add(sock);
      sock.on("close", () => this.conns.delete(sock));
      sock.setTimeout(TCP_IDLE_MS, () => sock.destroy());
      sock.on("error", () => {});
      let buf = Buffer.alloc(0);
      sock.on("data", (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
          buf = buf.subarray(2 + msg.length);
          this.handle(Buffer.from(msg))
            .then((answer) => {
              if (!answer || sock.destroyed || !sock.writable) return;
              const len = Buffer.alloc(2);
              len.writeUInt16BE(answer.length);
              sock.write(Buffer.concat([len, answer]));
            })
            .catch(() => sock.destroy());
        }
        if (buf.length > 65537) sock.destroy();
      });
    });
    tcp.maxConnections = TCP_MAX_CONNECTIONS;
    await new Promise<void>((resolve, reject) => {
      tcp.once("error", reject);
      tcp.listen({ host: this.bindIp, port: this.port, exclusive: true }, () => {
        tcp.off("error", reject);
        resolve();
      });
    });
    // A failed accept (say, out of descriptors) is reported as the server's 'error': it must find a
    // listener (issue #19 finding 6); the listener goes on accepting once it can.
    tcp.on("error", () => {});
    this.tcp = tcp;
  }

  /** Stops answering; answers still on their way are dropped. */
  async close(): Promise<void> {
    const udp = this.udp;
    this.udp = undefined;
    udp?.close();
    const tcp = this.tcp;
    this.tcp = undefined;
    if (tcp) {
      for (const c of this.conns) c.destroy();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    }
  }
}
