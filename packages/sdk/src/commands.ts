import type { ExecQuery, OutputStream } from "@ums/protocol";
// The light subpaths: the package index builds every JSON schema at load (slow for a CLI start).
import { StreamId } from "@ums/protocol/exec";
import type { UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { SdkErrorCode, UmsError } from "./errors.js";
import { chunkedRequest } from "./http1.js";

export interface RunOpts extends RequestOpts {
  /** Extra environment variables of the process. */
  env?: Readonly<Record<string, string>> | undefined;
  /** Working directory (default: the unit user's home, /home/unit). */
  cwd?: string | undefined;
  /** Run as `root` of the unit instead of the unit user. */
  user?: "unit" | "root" | undefined;
  /** Bytes for the process's stdin (it sees end of file after them). Default: no stdin. */
  stdin?: string | Uint8Array | undefined;
  /** Called with each piece of standard output as it arrives (decoded as UTF-8). */
  onStdout?: ((data: string) => void) | undefined;
  /** Called with each piece of standard error as it arrives (decoded as UTF-8). */
  onStderr?: ((data: string) => void) | undefined;
  /**
   * Called with each piece of output as the bytes arrived, not decoded (binary output, a terminal
   * client). With it, the result's `stdout` and `stderr` are empty: nothing is buffered.
   */
  onOutput?: ((stream: "stdout" | "stderr", bytes: Uint8Array) => void) | undefined;
}

export interface CommandResult {
  stdout: string;
  stderr: string;
  /** The process's exit code; 128 + n when it was killed by signal n. */
  exitCode: number;
}

/** `unit.commands`: runs commands in the unit (spec 4.3, HTTP exec). */
export class Commands {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
  ) {}

  /**
   * Runs a command to its end and returns its output and exit code (a non-zero exit is a result,
   * not an error). An array is the program and its arguments; a string is a `bash -c` script.
   * `timeoutMs` bounds the whole run: when it passes, the SDK drops the connection (which ends the
   * process) and throws `TimeoutError`.
   */
  async run(cmd: string[] | string, opts: RunOpts = {}): Promise<CommandResult> {
    const argv = typeof cmd === "string" ? ["bash", "-c", cmd] : cmd;
    if (argv.length === 0) throw new UmsError("cmd must name a program", SdkErrorCode.InvalidConfig);
    const stdin = typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : opts.stdin;
    const decoders = { [StreamId.Stdout]: new TextDecoder(), [StreamId.Stderr]: new TextDecoder() };
    const out = { [StreamId.Stdout]: "", [StreamId.Stderr]: "" };
    const callbacks = { [StreamId.Stdout]: opts.onStdout, [StreamId.Stderr]: opts.onStderr };
    let exitCode: number | undefined;

    const emit = (id: OutputStream, text: string) => {
      if (text === "") return;
      out[id] += text;
      callbacks[id]?.(text);
    };
    await chunkedRequest(this.client, "POST", `${this.path()}/exec`, {
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      query: {
        cmd: argv,
        env: Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
        dir: opts.cwd,
        user: opts.user,
        stdin: stdin !== undefined ? true : undefined,
      } satisfies ExecQuery,
      body: stdin,
      onChunk: (frame) => {
        const id = frame[0];
        if ((id === StreamId.Stdout || id === StreamId.Stderr) && opts.onOutput)
          opts.onOutput(id === StreamId.Stdout ? "stdout" : "stderr", frame.subarray(1));
        else if (id === StreamId.Stdout || id === StreamId.Stderr)
          emit(id, decoders[id].decode(frame.subarray(1), { stream: true }));
        else if (id === StreamId.Exit) exitCode = frame[1] ?? 0;
      },
    });
    emit(StreamId.Stdout, decoders[StreamId.Stdout].decode());
    emit(StreamId.Stderr, decoders[StreamId.Stderr].decode());
    if (exitCode === undefined) {
      throw new UmsError("the exec stream ended without the process's exit code", SdkErrorCode.BadResponse, {
        status: 200,
      });
    }
    return { stdout: out[StreamId.Stdout], stderr: out[StreamId.Stderr], exitCode };
  }
}
