import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import {
  type Answer,
  ESCAPE_FS,
  escapeUnit,
  OWNED_CANARY,
  queryOf,
  RACE,
  RUN_CANARY,
  rand,
  secrets,
  UNIT,
} from "../testing/fs-escape-fixture.js";

// Issue 19, finding 5 and the path-escape checks (the suite, its oracles and its unit:
// testing/fs-escape-fixture.ts).
// This file: unit root swaps a directory for a symlink under running requests.

describe("filesystem API: /.unit is refused (finding 5), no path escapes", { timeout: 15 * 60_000 }, () => {
  const u = escapeUnit();
  const { call, sh, hostSnapshot, unitSnapshot, checkAnswer } = u;
  const base = ESCAPE_FS;

  it("races: unit root swaps a directory for a symlink to /.unit/run while the API works in it", async () => {
    await sh(
      `rm -rf ${RACE}; mkdir -p ${RACE}/d ${RACE}/copies; printf benign > ${RACE}/d/${OWNED_CANARY}; ` +
        `printf benign > ${RACE}/d/${RUN_CANARY}; printf source > ${RACE}/src; ln -s /.unit/run ${RACE}/link; chown -hR 1000:1000 ${RACE}`,
    );
    const host0 = hostSnapshot();
    const unit0 = await unitSnapshot();
    // rename(2) both ways, about a millisecond in each state: a directory, or a symlink to /.unit/run.
    // Bounded: at most 20000 rounds, and it stops when the stop file appears (or the unit goes).
    // An API call with mkdir may make a new d while the real one is away: the swapper removes
    // that stray directory and goes on (rename onto a non-empty directory fails with EISDIR), up to
    // ten times, as the API's calls may make it again between the removal and the rename (seen in CI:
    // "back: Directory not empty").
    const swapper = `my ($d, $r, $l, $stop) = @ARGV; my $n = 0;
sub into { my ($from, $to, $what) = @_; for (1 .. 10) { return if rename($from, $to); system("rm", "-rf", $to); } rename($from, $to) or die "$what: $!"; }
while ($n < 20000 && !-e $stop) {
  rename($d, $r) or die "away: $!"; into($l, $d, "link in"); select(undef, undef, undef, 0.001);
  rename($d, $l) or die "link out: $!"; into($r, $d, "back"); select(undef, undef, undef, 0.001); $n++;
}
print "$n\n";`;
    const loop = execHttp(
      u.s.url,
      u.token,
      UNIT,
      ["perl", "-e", swapper, `${RACE}/d`, `${RACE}/d.real`, `${RACE}/link`, `${RACE}/stop`],
      {
        user: "root",
      },
    );
    const tally: Record<string, number> = {};
    const failures: string[] = [];
    const d = `${RACE}/d`;
    const ops: (() => Promise<Answer>)[] = [];
    for (const asRoot of [true, true, false]) {
      const q = (path: string, extra: Record<string, string | boolean> = {}) =>
        queryOf({ path, workingDir: "/", asRoot, ...extra }, "plain");
      const j = (extra: object) => ({ workingDir: "/", asRoot, ...extra });
      ops.push(
        () => call("GET", `${base}/read?${q(`${d}/${OWNED_CANARY}`)}`),
        () => call("GET", `${base}/read?${q(`${d}/${RUN_CANARY}`)}`),
        () => call("PUT", `${base}/write?${q(`${d}/${OWNED_CANARY}`)}`, { body: "raced" }),
        () => call("PUT", `${base}/write?${q(`${d}/new/${RUN_CANARY}`, { mkdir: true })}`, { body: "raced" }),
        () => call("POST", `${base}/chmod`, { json: j({ path: `${d}/${OWNED_CANARY}`, mode: "0600" }) }),
        () => call("POST", `${base}/chmod`, { json: j({ path: d, mode: "0755", recursive: true }) }),
        () => call("POST", `${base}/chown`, { json: j({ path: `${d}/${OWNED_CANARY}`, uid: 1000, gid: 1000 }) }),
        () => call("DELETE", `${base}/delete`, { json: j({ path: `${d}/${RUN_CANARY}` }) }),
        () => call("GET", `${base}/list?${q(d)}`),
        () => call("GET", `${base}/list?${q(RACE, { recursive: true })}`),
        () =>
          call("POST", `${base}/copy`, {
            json: j({ source: `${d}/${OWNED_CANARY}`, dest: `${RACE}/copies/${rand()}` }),
          }),
        () => call("POST", `${base}/copy`, { json: j({ source: `${RACE}/src`, dest: `${d}/${OWNED_CANARY}` }) }),
        () =>
          call("POST", `${base}/rename`, {
            json: j({ source: `${d}/${RUN_CANARY}`, dest: `${RACE}/copies/${rand()}` }),
          }),
      );
    }
    const deadline = Date.now() + 20_000;
    try {
      let next = 0;
      const worker = async () => {
        while (next < 600 && Date.now() < deadline) {
          const i = next++;
          const op = ops[i % ops.length] as () => Promise<Answer>;
          const r = await op().catch((err: Error) => ({ status: 0, text: err.message, body: undefined }));
          // A read of a file that another op truncates or replaces meanwhile is cut short on purpose
          // (the server destroys the response rather than pass a partial body off as whole, agent/relay.ts):
          // for the two reads, a cut transfer is an answer, not a failure.
          if (r.status === 0 && (i % ops.length) % (ops.length / 3) < 2 && /fetch failed|terminated/.test(r.text)) {
            tally.cut = (tally.cut ?? 0) + 1;
            continue;
          }
          const kind = r.status >= 200 && r.status < 300 ? "2xx" : String(r.status);
          tally[kind] = (tally[kind] ?? 0) + 1;
          try {
            checkAnswer(`race op ${i % ops.length}`, r);
            if (r.status === 200 && Array.isArray(r.body?.entries)) {
              const names = (r.body.entries as { name: string }[]).map((e) => e.name);
              assert.ok(
                !names.includes("agent.sock") && !names.includes("host.sock"),
                `race op ${i % ops.length} listed /.unit/run`,
              );
            }
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      };
      await Promise.all([worker(), worker(), worker()]);
    } finally {
      await sh(`touch ${RACE}/stop`).catch(() => {});
    }
    const swapped = await loop;
    const rounds = Number(swapped.stdout.toString().trim());
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} failures; tally ${JSON.stringify(tally)}`);
    assert.ok(rounds > 0, `the swapper ran (exit ${swapped.exitCode}): ${swapped.stdout} ${swapped.stderr}`);
    // The race was live: some operations met the directory, some the symlink.
    assert.ok((tally["2xx"] ?? 0) > 0 && (tally["403"] ?? 0) > 0, `tally ${JSON.stringify(tally)}, ${rounds} swaps`);
    assert.deepEqual(hostSnapshot(), host0, "the host side of /.unit/run changed");
    assert.equal(await unitSnapshot(), unit0, "the unit's /.unit changed");
    const copies = await sh(`cat ${RACE}/copies/* 2>/dev/null; true`);
    for (const secret of Object.values(secrets)) assert.ok(!copies.includes(secret), "a copy took a host canary");
    process.stderr.write(`fs-escape race: ${rounds} swaps, ${JSON.stringify(tally)}\n`);
  });
});
