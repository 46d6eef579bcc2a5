// Root in a unit is the attacker: it may ptrace its own processes (PID 1, catatonit, and the agent,
// which run as its root), and those write to a host file, the unit's agent.log (their stdout and
// stderr, runtime/runc/runc.ts). Before the cap (runtime/agent-log-cap.ts) a unit could fill the
// host's disk through it: here its PID 1 is made to write 10 MB in well under a second.
import assert from "node:assert/strict";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { startWithUnit, type TestServer } from "../testing/server.js";

/** As unit root: makes process PID write COUNT pages of its own stack to its descriptor FD, by ptrace. */
const INJECT = `
# As root in a unit: makes process PID write COUNT pages of its own stack to its descriptor FD
# (ptrace: attach, point it at the \`syscall\` it sleeps in, single-step, restore, detach).
import ctypes, os, sys
pid, fd, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
    ).split()]
def check(r, what):
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
check(libc.ptrace(16, pid, None, None), "attach")
os.waitpid(pid, 0)
saved = Regs()
check(libc.ptrace(12, pid, None, ctypes.byref(saved)), "getregs")
word = libc.ptrace(1, pid, ctypes.c_void_p(saved.rip - 2), None) & 0xFFFF
if word != 0x050F:
    raise SystemExit(f"no syscall instruction before rip ({word:#x})")
wrote = 0
for _ in range(count):
    r = Regs.from_buffer_copy(bytes(saved))
    r.rip = saved.rip - 2
    r.orig_rax = 0xFFFFFFFFFFFFFFFF
    r.rax, r.rdi, r.rsi, r.rdx = 1, fd, saved.rsp & ~0xFFF, 4096
    check(libc.ptrace(13, pid, None, ctypes.byref(r)), "setregs")
    check(libc.ptrace(9, pid, None, None), "singlestep")
    os.waitpid(pid, 0)
    out = Regs()
    check(libc.ptrace(12, pid, None, ctypes.byref(out)), "getregs")
    n = ctypes.c_longlong(out.rax).value
    if n < 0:
        raise SystemExit(f"write failed: {os.strerror(-n)}")
    wrote += n
check(libc.ptrace(13, pid, None, ctypes.byref(saved)), "restore")
check(libc.ptrace(17, pid, None, None), "detach")
print(f"wrote {wrote}")
`;

describe("attack: a unit makes its PID 1 fill its agent.log", () => {
  let s: TestServer;
  let token: string;
  let id: string;
  before(async () => {
    // Metrics off: the cap is not a part of them.
    ({ s, token } = await startWithUnit("log-fill", "filler", { metrics: false }));
    id = (await s.api("GET", "/v1/units/filler", { token })).body.id;
  });
  after(() => s?.close());

  it("is cut at the cap within seconds, and the unit goes on", async () => {
    const path = join(s.config.dataDir, "run", id, "agent.log");
    const r = await execHttp(
      s.url,
      token,
      "filler",
      ["sh", "-c", "cat > /tmp/inject.py && python3 /tmp/inject.py 1 1 2500"],
      {
        user: "root",
        stdin: INJECT,
      },
    );
    assert.equal(r.exitCode, 0, r.stderr.toString());
    assert.equal(r.stdout.toString(), "wrote 10240000\n", "PID 1 wrote 10 MB to its stdout, the host's agent.log");
    const end = Date.now() + 10_000;
    while ((await stat(path)).size > 1024 * 1024 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    assert.ok((await stat(path)).size < 1024 * 1024, "the host cut the file");
    assert.match(await readFile(path, "utf8"), /"msg":"ums: cut at \d+ bytes \(over 8388608\)"/);
    const after = await execHttp(s.url, token, "filler", ["echo", "still here"]);
    assert.equal(after.stdout.toString(), "still here\n");
  });
});
