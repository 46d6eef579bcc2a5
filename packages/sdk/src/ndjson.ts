import { SdkErrorCode, StreamError, UmsError } from "./errors.js";

type Event = { type: string } & Record<string, unknown>;

/**
 * The events of an NDJSON body (spec section 6), one per line, as they arrive. An `error` event
 * is thrown as a `StreamError` (spec 7: a stream that fails mid-way reports an error event), and
 * so is a stream that ends without a `complete` event, so a loop that finishes saw it complete.
 */
export async function* ndjsonEvents<E extends { type: string }>(res: Response): AsyncGenerator<E, void, undefined> {
  if (res.body === null) throw new StreamError("the stream had no body");
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  let buffered = "";
  let completed = false;
  const parse = (line: string): E => {
    let ev: unknown;
    try {
      ev = JSON.parse(line);
    } catch {
      throw new UmsError(`the stream sent a line that is not JSON: ${line.slice(0, 200)}`, SdkErrorCode.BadResponse);
    }
    if (typeof ev !== "object" || ev === null || typeof (ev as Event).type !== "string") {
      throw new UmsError(`the stream sent an event without a type: ${line.slice(0, 200)}`, SdkErrorCode.BadResponse);
    }
    const event = ev as Event;
    if (event.type === "error") {
      const message = [event.error, event.data, event.message].find((m) => typeof m === "string" && m !== "");
      throw new StreamError(String(message ?? "the stream reported an error"), event);
    }
    if (event.type === "complete") completed = true;
    return event as unknown as E;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffered += decoder.decode(value, { stream: !done });
      const lines = buffered.split("\n");
      buffered = done ? "" : (lines.pop() ?? "");
      for (const line of lines) if (line.trim() !== "") yield parse(line);
      if (done) break;
    }
  } finally {
    reader.releaseLock();
    await res.body.cancel().catch(() => {});
  }
  if (!completed) throw new StreamError("the stream ended before its 'complete' event");
}

/** Reads a whole NDJSON stream, calling `onEvent` for each event; returns them all (the last is `complete`). */
export async function collectEvents<E extends { type: string }>(
  res: Response,
  onEvent?: ((event: E) => void) | undefined,
): Promise<E[]> {
  const all: E[] = [];
  for await (const ev of ndjsonEvents<E>(res)) {
    all.push(ev);
    onEvent?.(ev);
  }
  return all;
}
