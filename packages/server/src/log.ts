import pino, { type Logger } from "pino";

/**
 * Structured JSON logs to stderr (stdout stays free for command output), or to `destination`
 * (`ums serve` on a terminal passes one that prints readable lines).
 */
export function createLogger(
  level = process.env.UMS_LOG_LEVEL ?? "info",
  destination: pino.DestinationStream = pino.destination(2),
): Logger {
  return pino({ level, base: { service: "ums" }, redact: ["req.headers.authorization", "*.token"] }, destination);
}
