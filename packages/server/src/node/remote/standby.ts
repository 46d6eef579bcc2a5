import type { Socket } from "node:net";

/**
 * Connections to a node opened ahead of need (node-endpoint.ts `GET /node/v1/standby`), each of which
 * serves one wake: a wake through one skips a TCP connection and an HTTP exchange with the node
 * (issue #15, the API replica's overhead). Idle ones hold nothing on the node but the connection,
 * and do not keep this process alive.
 */
export class StandbyPool {
  private readonly idle: Socket[] = [];
  private opening = 0;
  private closed = false;

  constructor(
    private readonly open: () => Promise<Socket>,
    private readonly size = 2,
  ) {}

  /**
   * A connection still open, or none (then the caller opens its own); the pool is not refilled here.
   * It flows: the caller listens to it at once (a byte that came meanwhile would be lost).
   */
  take(): Socket | undefined {
    for (let s = this.idle.shift(); s; s = this.idle.shift()) {
      s.off("data", unasked);
      if (!s.destroyed && s.readable && s.writable) {
        s.ref();
        return s;
      }
      s.destroy();
    }
    return undefined;
  }

  /**
   * Opens connections until `size` are idle or opening. Called once a wake is done with its own
   * (its lease released), so that opening them does not take the host's CPUs from the wake's work;
   * a node that cannot be reached fails them quietly, and the next wake finds none.
   */
  fill(): void {
    while (!this.closed && this.idle.length + this.opening < this.size) {
      this.opening++;
      this.open()
        .finally(() => {
          this.opening--;
        })
        .then((s) => (this.closed ? s.destroy() : this.keep(s)))
        // A node that cannot be reached: the next wake finds none, and opens a connection of its own.
        .catch(() => {});
    }
  }

  private keep(s: Socket): void {
    s.on("error", () => {});
    // Read while idle, so that the node's end of it is seen (and it leaves the pool) at once.
    s.on("data", unasked);
    s.once("close", () => {
      const i = this.idle.indexOf(s);
      if (i >= 0) this.idle.splice(i, 1);
    });
    s.unref();
    this.idle.push(s);
  }

  /** Closes the idle connections and opens no more. */
  close(): void {
    this.closed = true;
    for (const s of this.idle.splice(0)) s.destroy();
  }
}

/** The node sends nothing on an idle standby connection: one that does is not used. */
function unasked(this: Socket): void {
  this.destroy();
}
