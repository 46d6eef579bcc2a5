import type { UnitAgent } from "../../agent/client.js";
import { agentClient } from "../../agent/client.js";
import { AgentTimeoutError } from "../../agent/deadline.js";
import { AgentUnreachableError } from "../../agent/errors.js";
import { RelaySocket } from "../../agent/relay.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import { UnitDeletedError, UnitUnavailableError } from "../errors.js";
import type { UnitLease } from "../unit-node.js";
import type { LocalNode } from "./local-node.js";

/**
 * A unit woken on this host and held awake until `release()`. Its agent's calls are the one agent
 * client's (agent/client.ts) with the liveness rule on top: a call that finds no agent listening
 * (the unit died since it was last seen alive) makes the lifecycle check the unit, boot it again
 * if need be, and is tried once more when nothing of it was sent yet.
 */
export class LocalLease implements UnitLease {
  readonly agent: UnitAgent;
  private hold: () => void;
  private released = false;

  constructor(
    private readonly node: LocalNode,
    private readonly org: OrgRecord,
    readonly unit: UnitRecord,
    readonly booted: boolean,
    hold: () => void,
  ) {
    this.hold = hold;
    // Made at the first agent call: a proxied request never calls the agent (issue #16 part 2).
    let client: UnitAgent | undefined;
    const direct = () => {
      client ??= agentClient(node.agentEndpoint(unit));
      return client;
    };
    const replayable = (body: unknown) => body === undefined || typeof body === "string";
    this.agent = {
      request: (method, path, opts) => this.retry(() => direct().request(method, path, opts), replayable(opts?.body)),
      json: (method, path) => this.retry(() => direct().json(method, path), true),
      websocket: (path) => this.retry(() => direct().websocket(path), true),
      fs: (as, method, path, body, headers) =>
        this.retry(() => direct().fs(as, method, path, body, headers), replayable(body)),
      read: (as, path) => this.retry(() => direct().read(as, path), true),
      tunnel: (host, port) => this.retry(() => direct().tunnel(host, port), true),
    };
  }

  private async retry<T>(call: () => Promise<T>, replayable: boolean): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof AgentUnreachableError)) throw err;
      // The unit was deleted under this request: say so (404), not that the unit failed (502).
      if (this.node.lifecycle.isDeleted(this.unit.id)) throw new UnitDeletedError(this.unit.name);
      this.node.lifecycle.suspect(this.unit.id);
      if (!replayable || !err.refused || this.released) throw err;
      const again = await this.node.hold(this.org, this.unit);
      this.hold();
      this.hold = again;
      return call();
    }
  }

  /**
   * Issue #15: a connection to the unit's agent for a node's endpoint to splice an API's call to
   * (node/remote/node-endpoint.ts), with the liveness rule: nothing of the call was sent yet. Its
   * reads are raw from the start (RelaySocket.pumpTo): the agent's answers, a file read's MiB among
   * them, go to the API's connection from a pair of buffers instead of a new one per 64 KiB read.
   */
  agentSocket(): Promise<RelaySocket> {
    const ep = this.node.agentEndpoint(this.unit);
    return this.retry(
      () =>
        new Promise<RelaySocket>((resolve, reject) => {
          const relay = new RelaySocket(ep.path);
          relay.beginRaw();
          const { socket } = relay;
          const timer = setTimeout(
            () => socket.destroy(ep.timedOut(new AgentTimeoutError("connect", ep.timeouts.connectMs))),
            ep.timeouts.connectMs,
          );
          socket.once("connect", () => {
            clearTimeout(timer);
            socket.removeListener("error", fail);
            resolve(relay);
          });
          const fail = (err: Error) => {
            clearTimeout(timer);
            reject(err instanceof AgentTimeoutError ? err : new AgentUnreachableError(err));
          };
          socket.once("error", fail);
        }),
      true,
    );
  }

  async httpTarget(): Promise<{ host: string; port: number }> {
    const port = await this.node.httpTargets.port(this.unit, this.agent);
    const host = this.node.runtime.address(this.unit.id);
    if (!host) throw new UnitUnavailableError(`unit '${this.unit.name}' has no network address`);
    return { host, port };
  }

  servicesChanged(): void {
    this.node.httpTargets.forget(this.unit.id);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.hold();
  }
}
