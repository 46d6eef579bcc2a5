import { randomInt } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import { connect, isIPv6 } from "node:net";
import { packetId, readAnswer, withId } from "./packets.js";

interface Pending {
  resolve(buf: Buffer): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * The resolver allowed lookups are forwarded to. Queries share one UDP socket, each under a random
 * id of ours (RFC 5452: answers are matched by id and by the upstream's address and port); an
 * answer marked truncated is asked again over TCP (RFC 7766).
 */
export class Upstream {
  private socket: Socket | undefined;
  private readonly pending = new Map<number, Pending>();

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly timeoutMs = 2000,
  ) {}

  async query(packet: Buffer): Promise<Buffer> {
    let answer: Buffer;
    try {
      answer = await this.udp(packet);
    } catch {
      answer = await this.udp(packet); // one retry: UDP may lose a datagram
    }
    return readAnswer(answer)?.truncated ? this.tcp(packet) : answer;
  }

  private sock(): Socket {
    if (this.socket) return this.socket;
    const s = createSocket(isIPv6(this.host) ? "udp6" : "udp4");
    s.on("message", (msg, rinfo) => {
      if (rinfo.address !== this.host || rinfo.port !== this.port) return;
      const p = this.pending.get(packetId(msg));
      if (!p) return;
      this.pending.delete(packetId(msg));
      clearTimeout(p.timer);
      p.resolve(msg);
    });
    s.on("error", () => {});
    s.unref();
    this.socket = s;
    return s;
  }

  private udp(packet: Buffer): Promise<Buffer> {
    const clientId = packetId(packet);
    let id = randomInt(0x10000);
    while (this.pending.has(id)) id = randomInt(0x10000);
    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer from ${this.host}:${this.port} within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending.set(id, { resolve: (buf) => resolve(withId(buf, clientId)), reject, timer });
      this.sock().send(withId(packet, id), this.port, this.host, (err) => {
        if (!err) return;
        this.pending.delete(id);
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  /** RFC 1035 section 4.2.2: a two-byte length before each message. */
  private tcp(packet: Buffer): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      const sock = connect({ host: this.host, port: this.port });
      let buf = Buffer.alloc(0);
      sock.setTimeout(this.timeoutMs, () => sock.destroy(new Error(`TCP answer from ${this.host} timed out`)));
      sock.on("connect", () => {
        const len = Buffer.alloc(2);
        len.writeUInt16BE(packet.length);
        sock.end(Buffer.concat([len, packet]));
      });
      sock.on("data", (d) => {
        buf = Buffer.concat([buf, d]);
        if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          resolve(buf.subarray(2, 2 + buf.readUInt16BE(0)));
          sock.destroy();
        }
      });
      sock.on("error", reject);
      sock.on("close", () => reject(new Error(`TCP connection to ${this.host} closed before an answer`)));
    });
  }

  close(): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error("resolver closed"));
    }
    this.pending.clear();
    this.socket?.close();
    this.socket = undefined;
  }
}
