import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import net from "node:net";
import { dirname } from "node:path";
import { describe, it } from "node:test";
import { privateSocketPair } from "./private-socket-pair.js";

describe("privateSocketPair", () => {
  it("connects this process's socket to the peer it hands out, and leaves no directory", async () => {
    let dirOf = "";
    const { mine, peer } = await privateSocketPair((path) => net.connect(path), {
      onListening: async (path) => {
        dirOf = dirname(path);
      },
    });
    try {
      assert.ok(dirOf && !existsSync(dirOf), `the listener's directory ${dirOf} is left`);
      const got = new Promise<string>((resolve) => mine.once("data", (d) => resolve(d.toString())));
      peer.write("through the pair");
      assert.equal(await got, "through the pair");
    } finally {
      mine.destroy();
      peer.destroy();
    }
  });

  // Another process on the host that reaches the listener first gets nothing, and nothing is
  // handed to a child on a pair that cannot be trusted. The directory is gone either way.
  it("fails when another connection reached its listener first", async () => {
    let dirOf = "";
    let intruder: net.Socket | undefined;
    let ours: net.Socket | undefined;
    try {
      await assert.rejects(
        privateSocketPair(
          (path) => {
            ours = net.connect(path);
            return ours;
          },
          {
            onListening: (path) => {
              dirOf = dirname(path);
              return new Promise<void>((resolve) => {
                intruder = net.connect(path, () => resolve());
                intruder.on("error", () => resolve());
              });
            },
          },
        ),
        /a second connection reached a private socket pair's listener/,
      );
      assert.ok(ours?.destroyed, "this process's socket is destroyed");
    } finally {
      intruder?.destroy();
    }
    assert.ok(dirOf && !existsSync(dirOf), `the listener's directory ${dirOf} is left`);
  });
});
