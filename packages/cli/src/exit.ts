/**
 * Exits once what was written to stdout and stderr has left the process. A write to a pipe whose
 * reader is behind is queued (the pipe is non-blocking: only what fits is written at once), and
 * process.exit() drops that queue: `ums exec web -- cat big | …` lost its last tens of KiB that way.
 */
export async function exitWhenFlushed(code?: number): Promise<never> {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  // Not process.exit(undefined): node 20 takes that as 0, not as process.exitCode.
  process.exit(code ?? process.exitCode);
}

/** Resolves when the stream's queued writes are done (an empty write completes after them), or it failed. */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed || stream.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    stream.write("", () => resolve());
  });
}
