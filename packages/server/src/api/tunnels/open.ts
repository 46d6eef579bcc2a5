import { ErrorCode, parseTunnelOpen, type TunnelAnswer } from "@ums/protocol";
import type { FastifyBaseLogger } from "fastify";
import type WebSocket from "ws";
import { AgentAnswerError } from "../../agent/errors.js";
import type { AgentTunnel } from "../../agent/tunnel.js";
import { errorAnswer } from "../../errors/respond.js";
import type { UnitLease } from "../../node/unit-node.js";
import { type EarlyMessage, relayTunnel, toBuffer } from "./relay.js";

/** How long a client has, once its websocket is open, to send the tunnel's `{host, port}`. */
export const OPEN_MESSAGE_MS = 10_000;

/** A `{host, port}` is small: a larger first message is refused unread. */
const MAX_OPEN_MESSAGE = 4096;

/** The agent's refusals a client gets as they are: they say what happened to the connection in the unit. */
const TUNNEL_CODES: readonly string[] = [ErrorCode.TunnelRefused, ErrorCode.TunnelUnreachable, ErrorCode.Validation];

/** A failure to open a tunnel as its answer; `logFault` hears of it when it is the server's fault. */
export function failureAnswer(err: unknown, logFault: (err: unknown) => void): TunnelAnswer {
  if (err instanceof AgentAnswerError && err.code !== undefined && TUNNEL_CODES.includes(err.code)) {
    return err.errors
      ? { status: "error", errors: [...err.errors], code: err.code }
      : { status: "error", error: err.message, code: err.code };
  }
  const answer = errorAnswer(err);
  if (answer.internal) logFault(err);
  const body = answer.body as { error?: string; errors?: string[]; code: string };
  return body.errors
    ? { status: "error", errors: body.errors, code: body.code }
    : { status: "error", error: body.error ?? "", code: body.code };
}

/**
 * A client's tunnel, from its websocket's open (packages/protocol/src/tunnel.ts): waits for its
 * `{host, port}` (OPEN_MESSAGE_MS), has the unit's agent connect to it from inside the unit, answers
 * `{"status":"connected","target"}` and relays (relay.ts); or answers `{"status":"error",…}` and
 * closes (1008 for a bad first message, 1011 when the connection could not be made). Bytes the client
 * sends before the answer wait for it. `release` (the unit's lease and the tunnel's count) is called
 * once, when the tunnel is gone.
 *
 * `dialing` is the connection the upgrade's query asked for (`?host=&port=`, started while the upgrade
 * completed): then no first message is awaited, and every message is the tunnel's.
 */
export function openTunnel(
  client: WebSocket,
  lease: UnitLease,
  release: () => void,
  log: FastifyBaseLogger,
  dialing?: Promise<AgentTunnel>,
): void {
  let relaying = false;
  const refuse = (answer: TunnelAnswer, code: number) => {
    if (client.readyState === client.OPEN) {
      // A paused websocket could not read the client's answer to the close: resume it first.
      client.resume();
      client.send(JSON.stringify(answer));
      client.close(code, "the tunnel was not opened");
    }
    release();
  };
  client.on("error", () => {});
  const timer = setTimeout(
    () =>
      refuse(
        {
          status: "error",
          errors: [`send {"host", "port"} as the first message, within ${OPEN_MESSAGE_MS / 1000} s`],
          code: ErrorCode.Validation,
        },
        1008,
      ),
    OPEN_MESSAGE_MS,
  );
  client.once("close", () => {
    clearTimeout(timer);
    if (!relaying) release();
  });
  // What follows the first message is the tunnel's: it waits until the target is connected. A paused
  // websocket still hands over the messages already read (at most one read's worth).
  const early: EarlyMessage[] = [];
  let first = !dialing;
  const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
    if (first) {
      first = false;
      opening(data);
    } else early.push({ data, isBinary });
  };
  client.on("message", onMessage);
  const opening = (data: WebSocket.RawData) => {
    clearTimeout(timer);
    client.pause();
    const bytes = toBuffer(data);
    const parsed =
      bytes.length > MAX_OPEN_MESSAGE
        ? { ok: false as const, errors: [`the first message must be at most ${MAX_OPEN_MESSAGE} bytes`] }
        : parseTunnelOpen(bytes.toString("utf8"));
    if (!parsed.ok) {
      refuse({ status: "error", errors: parsed.errors, code: ErrorCode.Validation }, 1008);
      return;
    }
    const { host, port } = parsed.value;
    connecting(lease.agent.tunnel(host, port));
  };
  const connecting = (tunnel: Promise<AgentTunnel>) => {
    tunnel
      .then(
        (tunnel) => {
          if (client.readyState !== client.OPEN) {
            tunnel.socket.destroy();
            release();
            return;
          }
          relaying = true;
          client.send(JSON.stringify({ status: "connected", target: tunnel.target } satisfies TunnelAnswer));
          client.off("message", onMessage);
          relayTunnel(client, tunnel.socket, release, early.splice(0));
          client.resume();
        },
        (err: unknown) =>
          refuse(
            failureAnswer(err, (e) => log.error({ err: e }, "opening a tunnel failed")),
            1011,
          ),
      )
      .catch((err: unknown) => {
        log.error({ err }, "relaying a tunnel failed");
        client.terminate();
        release();
      });
  };
  if (dialing) {
    clearTimeout(timer);
    client.pause();
    connecting(dialing);
  }
}
