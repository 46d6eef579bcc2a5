import pino, { type Logger } from "pino";

/** Structured JSON logs to stderr (stdout stays free for command output). */
export function createLogger(level = process.env.UMS_LOG_LEVEL ?? "info"): Logger {
  return pino(
    { level, base: { service: "ums" }, redact: ["req.headers.authorization", "*.token"] },
    pino.destination(2),
  );
}
