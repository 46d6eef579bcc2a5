import type { IncomingMessage } from "node:http";
import { encodeExitFrame, encodeFrame, FrameReader, StreamId } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type WebSocket from "ws";

// Non-TTY exec over plain HTTP (spec 4.3): every agent frame (first byte the
// stream id) is written and flushed as its own chunk, uncompressed, and the two-byte exit frame
// `[3, code]` ends the response. The request body is the process's stdin when `stdin=true`.

/** The client's answer of an HTTP exec: its head is sent at once; frames follow as they come. */
function execAnswer(reply: FastifyReply, done: () => void) {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "application/octet-stream",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
  });
  res.flushHeaders();
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const fail = (message: string) => {
    if (res.writableEnded) return finish();
    res.write(encodeFrame(StreamId.Stderr, Buffer.from(`ums: ${message}\n`)));
    res.end(encodeExitFrame(255));
    finish();
  };
  return { res, finish, fail };
}

/**
 * From the agent's plain HTTP exec (`POST /exec` of the agent; the client's body went to it as
 * stdin): its answer is the frames, each after its length (protocol's FrameReader), passed on with
 * backpressure.
 */
export function pipeAgentExecAnswer(reply: FastifyReply, answer: IncomingMessage, done: () => void): void {
  const { res, finish, fail } = execAnswer(reply, done);
  const reader = new FrameReader();
  answer.on("data", (chunk: Buffer) => {
    for (const frame of reader.push(chunk)) {
      if (res.writableEnded) return;
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
  const lost = () => fail("the unit's agent closed the session before the process exited");
  answer.on("end", lost);
  answer.on("close", lost);
  answer.on("error", lost);
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
  const { res, finish, fail } = execAnswer(reply, done);
  agent.on("message", (data, isBinary) => {
    if (!isBinary || res.writableEnded) return; // session_info, pings and port events are for websockets
    const frame = data as Buffer;
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
