/*
 * ums-spawn: starts the processes of a unit's exec sessions for the agent (issue #16 part 4).
 *
 * Node starts a process with fork(2), and the agent is a node of ~50-60 MB: each fork copies its page
 * tables and waits for the child's exec on the agent's only thread (1-4 ms per exec on the test
 * host, growing with the agent's size). This helper is small, so its fork is cheap, and the wait is
 * on its thread, not the agent's. The agent starts it once (exec/native-spawner.ts) and uses node's
 * spawn whenever it is missing, not yet up or gone.
 *
 * Usage: ums-spawn SOCKET
 * Requests come on fd 0, replies go to fd 1 (both from the agent); SOCKET is the agent's listening
 * Unix socket in a directory only the agent's user can enter.
 *
 * Request: u32 length of what follows, then u32 id, flags, uid, gid, argc, envc, and NUL-terminated
 * strings: file (an absolute path: the agent resolved it), cwd, argv[0..argc), env[0..envc). All
 * integers are little-endian (the agent and this helper are on the same host).
 *   flags: 1 = stdin is a stream (else /dev/null); 2 = set the ids (setgroups(0), setgid, setuid).
 * For each stream (stdin when asked, then stdout, stderr) the helper connects to SOCKET and writes
 * the 8-byte header u32 id, u32 fd: the agent reads the process's output from, and writes its input
 * to, its side of those connections (the same Unix stream sockets node's spawn would have made).
 * Replies, 16 bytes: u32 id, u32 kind, i32 a, i32 b:
 *   0 READY    (id 0) a = the helper's pid, once at start;
 *   1 STARTED  a = pid (the process leads its own session and process group);
 *   2 FAILED   a = errno, b = stage (1 connecting a stream, 2 fork, 3 set-up or exec in the child);
 *   3 EXITED   (id 0) a = pid, b = the wait status, of a process that had STARTED.
 *
 * The child does what libuv (node's spawn with `detached: true`) does, in its order: setsid, the
 * stdio descriptors, chdir, setgroups(0)/setgid/setuid, default signal dispositions and an empty
 * mask, then execvpe (glibc's: a file without #! runs with /bin/sh, as node's spawn does). It also
 * raises its own OOM score to 1000 first (exec/spawn.ts's releaseOomProtection), while still root.
 *
 * Built static (no library of the unit's image is loaded, nor its /etc/ld.so.preload).
 * When the agent goes (EOF on fd 0), the helper exits; the processes it started run on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

enum { READY = 0, STARTED = 1, FAILED = 2, EXITED = 3 };
enum { STAGE_CONNECT = 1, STAGE_FORK = 2, STAGE_EXEC = 3 };
enum { F_STDIN = 1, F_SETIDS = 2 };
#define MAX_REQUEST (16u << 20) /* far above ARG_MAX: a longer frame is a broken agent */
#define HEADER_WORDS 7

static struct sockaddr_un addr;
static socklen_t addr_len;

static void die(void) { _exit(1); }

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die(); /* the agent is gone */
    p += n;
    len -= (size_t)n;
  }
}

static void reply(uint32_t id, uint32_t kind, int32_t a, int32_t b) {
  uint32_t msg[4] = {id, kind, (uint32_t)a, (uint32_t)b};
  write_all(1, msg, sizeof msg);
}

/* One stream of a request: a connection to the agent, introduced by its header. -1 and errno on failure. */
static int connect_stream(uint32_t id, uint32_t fd) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  while (connect(s, (struct sockaddr *)&addr, addr_len) < 0) {
    if (errno == EINTR) continue;
    int e = errno;
    close(s);
    errno = e;
    return -1;
  }
  uint32_t header[2] = {id, fd};
  if (send(s, header, sizeof header, MSG_NOSIGNAL) != (ssize_t)sizeof header) {
    int e = errno ? errno : EPIPE;
    close(s);
    errno = e;
    return -1;
  }
  return s;
}

struct request {
  uint32_t id, flags, uid, gid, argc, envc;
  char *file, *cwd;
  char **argv, **envp; /* NULL-terminated */
};

/* Splits the strings of a frame; 0 when the frame is malformed. */
static int parse(char *p, size_t len, struct request *r) {
  uint32_t w[HEADER_WORDS - 1];
  if (len < sizeof w) return 0;
  memcpy(w, p, sizeof w);
  r->id = w[0], r->flags = w[1], r->uid = w[2], r->gid = w[3], r->argc = w[4], r->envc = w[5];
  char *s = p + sizeof w, *end = p + len;
  size_t count = 2 + (size_t)r->argc + r->envc;
  if (r->argc == 0 || count > len) return 0;
  char **all = calloc(count + 2, sizeof(char *));
  if (!all) return 0;
  for (size_t i = 0; i < count; i++) {
    char *nul = memchr(s, 0, (size_t)(end - s));
    if (!nul) {
      free(all);
      return 0;
    }
    all[i < 2 + r->argc ? i : i + 1] = s;
    s = nul + 1;
  }
  r->file = all[0];
  r->cwd = all[1];
  r->argv = all + 2; /* all[2 + argc] stays NULL: argv's end */
  r->envp = all + 3 + r->argc; /* all[count + 1] stays NULL: envp's end */
  return 1;
}

static void child(const struct request *r, const int fds[3], int errfd) __attribute__((noreturn));
static void child(const struct request *r, const int fds[3], int errfd) {
  int err;
  int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    if (write(oom, "1000", 4) < 0) { /* best effort, as before */ }
    close(oom);
  }
  if (setsid() < 0) goto fail;
  for (int i = 0; i < 3; i++)
    if (dup2(fds[i], i) < 0) goto fail; /* fds[i] >= 3: the new descriptor is not close-on-exec */
  if (chdir(r->cwd) < 0) goto fail;
  if (r->flags & F_SETIDS) {
    (void)setgroups(0, NULL); /* as libuv: not fatal */
    if (setgid(r->gid) < 0 || setuid(r->uid) < 0) goto fail;
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) (void)sigaction(s, &dfl, NULL); /* EINVAL for KILL, STOP, libc's own */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execvpe(r->file, r->argv, r->envp);
fail:
  err = errno;
  if (write(errfd, &err, sizeof err) < 0) { /* the helper then sees EOF: reported as started */ }
  _exit(127);
}

static void spawn_request(const struct request *r) {
  int fds[3] = {-1, -1, -1};
  int stage = STAGE_CONNECT;
  int err = 0;
  if (r->flags & F_STDIN)
    fds[0] = connect_stream(r->id, 0);
  else
    fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fds[0] >= 0) fds[1] = connect_stream(r->id, 1);
  if (fds[1] >= 0) fds[2] = connect_stream(r->id, 2);
  if (fds[2] < 0) {
    err = errno;
  } else {
    int ep[2];
    stage = STAGE_FORK;
    if (pipe2(ep, O_CLOEXEC) < 0) {
      err = errno;
    } else {
      pid_t pid = fork();
      if (pid == 0) child(r, fds, ep[1]);
      if (pid < 0) err = errno;
      close(ep[1]);
      if (pid > 0) {
        /* The child's exec closes ep[1] (EOF: started); a failure before it writes its errno. */
        ssize_t n;
        do n = read(ep[0], &err, sizeof err);
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof err) {
          stage = STAGE_EXEC;
          while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        } else {
          err = 0;
          close(ep[0]);
          for (int i = 0; i < 3; i++) close(fds[i]);
          reply(r->id, STARTED, pid, 0);
          return;
        }
      }
      close(ep[0]);
    }
  }
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  reply(r->id, FAILED, err ? err : EIO, stage);
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    reply(0, EXITED, pid, status);
  }
}

int main(int argc, char **argv) {
  if (argc != 2 || strlen(argv[1]) >= sizeof addr.sun_path) return 2;
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, argv[1]);
  addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(argv[1]) + 1);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 1;
  /* Descriptors the helper inherited beyond its stdio go no further. */
  for (int fd = 3; fd < 1024; fd++)
    if (fd != sfd) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);

  size_t cap = 64 * 1024, len = 0;
  char *buf = malloc(cap);
  if (!buf) return 1;
  reply(0, READY, getpid(), 0);
  for (;;) {
    struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (p[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {}
      reap();
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    if (cap - len < 4096) {
      if (cap >= MAX_REQUEST + 8) return 1;
      cap *= 2;
      char *grown = realloc(buf, cap);
      if (!grown) return 1;
      buf = grown;
    }
    ssize_t n = read(0, buf + len, cap - len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return 0; /* the agent went */
    len += (size_t)n;
    size_t off = 0;
    while (len - off >= 4) {
      uint32_t flen;
      memcpy(&flen, buf + off, 4);
      if (flen > MAX_REQUEST) return 1;
      if (len - off - 4 < flen) break;
      struct request r;
      if (!parse(buf + off + 4, flen, &r)) return 1;
      spawn_request(&r);
      free(r.argv - 2);
      off += 4 + flen;
    }
    memmove(buf, buf + off, len - off);
    len -= off;
  }
}
