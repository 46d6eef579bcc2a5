import type { IncomingMessage } from "node:http";
import { encodeExitFrame, encodeFrame, FrameReader, StreamId } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type WebSocket from "ws";

// Non-TTY exec over plain HTTP (spec 4.3): every agent frame (first byte the
// stream id) is written and flushed as its own chunk, uncompressed, and the two-byte exit frame
// `[3, code]` ends the response. The request body is the process's stdin when `stdin=true`.

/**
 * How long an answer's head waits for the process's first frame before it goes alone. With the
 * first frame it leaves in the same write: a short command's whole answer (head, exit frame, end)
 * is one write to the client instead of two (issue #16 part 4: the head's own write was ~0.1 ms of
 * the server's CPU per exec here). A command that says nothing for this long still has its answer
 * begin at once after it, so a client sees the command started.
 */
const HEAD_WAIT_MS = 20;

/** The client's answer of an HTTP exec: its head goes with the first frame (or alone after HEAD_WAIT_MS). */
function execAnswer(reply: FastifyReply, done: () => void) {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "application/octet-stream",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
  });
  let wrote = false;
  const headAlone = setTimeout(() => {
    if (!wrote && !res.destroyed) res.flushHeaders();
  }, HEAD_WAIT_MS);
  /** Call before each write of a frame: the head then goes with it. */
  const writing = () => {
    if (wrote) return;
    wrote = true;
    clearTimeout(headAlone);
  };
  res.once("close", () => clearTimeout(headAlone));
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const fail = (message: string) => {
    if (res.writableEnded) return finish();
    writing();
    res.write(encodeFrame(StreamId.Stderr, Buffer.from(`ums: ${message}\n`)));
    res.end(encodeExitFrame(255));
    finish();
  };
  return { res, finish, fail, writing };
}

/**
 * From the agent's plain HTTP exec (`POST /exec` of the agent; the client's body went to it as
 * stdin): its answer is the frames, each after its length (protocol's FrameReader), passed on with
 * backpressure.
 */
export function pipeAgentExecAnswer(reply: FastifyReply, answer: IncomingMessage, done: () => void): void {
  const { res, finish, fail, writing } = execAnswer(reply, done);
  const reader = new FrameReader();
  answer.on("data", (chunk: Buffer) => {
    for (const frame of reader.push(chunk)) {
      if (res.writableEnded) return;
      writing();
      if (frame[0] === StreamId.Exit) {
        res.end(frame);
        answer.destroy(); // the agent ends its answer with the exit: nothing is lost
        finish();
        return;
      }
      if (!res.write(frame) && !answer.isPaused()) {
        answer.pause();
        res.once("drain", () => answer.resume());
      }
    }
  });
  // How the answer ended goes into the message and the log: the agent ending it (its side closed the
  // session) is not its connection breaking (the agent or its unit gone), and a rare one is only
  // explained by what it says.
  const lost = (how: string) => {
    if (res.destroyed && !res.writableEnded) return; // the client went away first: its answer ended here
    if (!res.writableEnded) reply.log.warn({ how }, "the agent's exec answer ended before the process's exit");
    fail(`the unit's agent closed the session before the process exited (${how})`);
  };
  answer.on("end", () => lost("its answer ended without the exit"));
  answer.on("error", (err) => lost(`the connection failed: ${err.message}`));
  answer.on("close", () => lost("the connection closed"));
  // The client went away: end the session (the agent kills the process of a session nobody holds).
  res.on("close", () => {
    if (!res.writableEnded) answer.destroy();
    finish();
  });
}

/** From the agent's exec websocket (an agent from before its plain HTTP exec); stdin as frames. */
export function pipeHttpExec(
  req: FastifyRequest,
  reply: FastifyReply,
  agent: WebSocket,
  stdin: boolean,
  done: () => void,
): void {
  const { res, finish, fail, writing } = execAnswer(reply, done);
  agent.on("message", (data, isBinary) => {
    if (!isBinary || res.writableEnded) return; // session_info, pings and port events are for websockets
    const frame = data as Buffer;
    writing();
    if (frame[0] === StreamId.Exit) {
      res.end(frame);
      agent.close();
      finish();
    } else {
      res.write(frame);
    }
  });
  agent.on("close", () => fail("the unit's agent closed the session before the process exited"));
  agent.on("error", (err) => fail(`lost the unit's agent: ${err.message}`));
  if (agent.readyState !== agent.OPEN) fail("the unit's agent closed the session before the process exited");
  agent.resume();
  // The client went away: end the session (the agent kills the process of a session nobody holds).
  res.on("close", () => {
    if (!res.writableEnded) agent.terminate();
    finish();
  });

  const body = req.raw;
  body.on("error", () => agent.terminate());
  if (!stdin) {
    body.resume();
    return;
  }
  body.on("data", (chunk: Buffer) => {
    if (agent.readyState !== agent.OPEN) return;
    agent.send(encodeFrame(StreamId.Stdin, chunk), { binary: true });
    if (agent.bufferedAmount > 1 << 20) {
      body.pause();
      const resume = setInterval(() => {
        if (agent.bufferedAmount < 1 << 18 || agent.readyState !== agent.OPEN) {
          clearInterval(resume);
          body.resume();
        }
      }, 5);
    }
  });
  body.on("end", () => {
    if (agent.readyState === agent.OPEN) agent.send(encodeFrame(StreamId.StdinEof), { binary: true });
  });
}
