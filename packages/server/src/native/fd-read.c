/*
 * ums-fd-read.node: a unit's file sent to a client with sendfile(2) (issue #16 part 1).
 *
 * A large read's bytes used to be copied four times in user space: by the agent from the file into its
 * buffers and into its socket, by the server from that socket into its buffers and into the client's.
 * Here the agent passes the file's open descriptor instead (SCM_RIGHTS on its connection with the
 * server; packages/agent/src/native/fd-send.c) and the server sends it to the client's socket with
 * sendfile(2), as a static file server would: the kernel copies the page cache into the socket.
 *
 * Root in a unit is the attacker, and the descriptor comes from the unit: the host never opens a path
 * here, it is handed an object. `receive` takes exactly one descriptor and keeps it only if statx(2),
 * asked not to ask the file's filesystem (AT_STATX_DONT_SYNC: a FUSE server in the unit is not
 * consulted), shows a regular file on the unit's own filesystem (the device of its rootfs, given by
 * the caller) opened for reading; anything else (a FIFO, a socket, a device, procfs, a FUSE mount, a
 * nested subvolume) is closed and refused. Everything that can wait on the unit or on the client
 * (the descriptor's arrival, the socket's room) waits on a thread of its own, never on node's thread
 * or its pool, bounded by a timeout (receive) or by `cancel` and an idle timeout (send).
 *
 * Exports:
 *   receive(sock, dev, timeoutMs, cb(err, fd, size))
 *     writes one byte ("go") on the connected Unix socket `sock` (the agent waits for it: node has
 *     stopped reading the socket by then, or its read would take the descriptor's byte and the kernel
 *     would drop the descriptor), then waits for one byte carrying one descriptor and checks it as
 *     above. err: a message, or null with the descriptor (close-on-exec, now the caller's) and the
 *     file's size.
 *   send(fd, sock, count, idleMs, cb(err, sent)) -> handle
 *     sends `count` bytes of `fd` from its offset 0 to the TCP socket `sock` (non-blocking: waits with
 *     poll(2)); fd is the send's from here on and closed at its end. err: null once all were sent, else
 *     why not ("cancelled", "idle", "short": the file shrank, or errno's text). `sock` is duplicated:
 *     node may close its own descriptor meanwhile, and a closed one must not be reused under the send.
 *   cancel(handle)
 *     ends the send (the duplicate is shut down, so the client sees the connection end).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                                            \
  do {                                                                                                         \
    if ((call) != napi_ok) {                                                                                   \
      napi_throw_error(env, NULL, "ums-fd-read: " #call " failed");                                            \
      return NULL;                                                                                             \
    }                                                                                                          \
  } while (0)

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------------- */
/* receive                                                                                         */

struct recv_op {
  int sock;
  uint64_t dev;
  int timeout_ms;
  napi_threadsafe_function tsfn;
  /* result */
  char err[160];
  int fd;
  int64_t size;
};

static void recv_fail(struct recv_op *op, const char *what, int err) {
  snprintf(op->err, sizeof op->err, "%s%s%s", what, err ? ": " : "", err ? strerror(err) : "");
}

/* Waits up to `left_ms` (< 0: no time left) for `events` on `fd`; 1 ready, 0 timed out, -1 error. */
static int wait_for(int fd, short events, int left_ms) {
  if (left_ms < 0) return 0;
  struct pollfd p = {.fd = fd, .events = events};
  for (;;) {
    int r = poll(&p, 1, left_ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

static void *recv_thread(void *arg) {
  struct recv_op *op = arg;
  op->fd = -1;
  int64_t deadline = now_ms() + op->timeout_ms;
  char go = 'g';
  ssize_t w;
  do w = send(op->sock, &go, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w != 1) {
    recv_fail(op, "the go byte could not be written", w < 0 ? errno : 0);
    goto done;
  }
  for (;;) {
    int r = wait_for(op->sock, POLLIN, (int)(deadline - now_ms()));
    if (r == 0) {
      recv_fail(op, "no descriptor came in time", 0);
      goto done;
    }
    if (r < 0) {
      recv_fail(op, "poll", errno);
      goto done;
    }
    char byte;
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(op->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      recv_fail(op, "recvmsg", errno);
      goto done;
    }
    if (n == 0) {
      recv_fail(op, "the agent closed the connection before sending the descriptor", 0);
      goto done;
    }
    /* Every descriptor that came is ours to close unless it is the one and only. */
    int fd = -1, count = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; i++) {
        int got;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        if (count++ == 0) fd = got;
        else close(got);
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      /* More descriptors than fit (the kernel closed those): refused whole. */
      if (fd >= 0) close(fd);
      recv_fail(op, "more than one descriptor came", 0);
      goto done;
    }
    if (count != 1 || byte != 'F') {
      if (fd >= 0) close(fd);
      recv_fail(op, "the agent's answer was not one descriptor", 0);
      goto done;
    }
    /* Not the file's filesystem's word (AT_STATX_DONT_SYNC): what the kernel already has. */
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_SIZE, &sx) != 0) {
      int e = errno;
      close(fd);
      recv_fail(op, "statx", e);
      goto done;
    }
    int flags = fcntl(fd, F_GETFL);
    if (!S_ISREG(sx.stx_mode)) {
      close(fd);
      recv_fail(op, "the descriptor is not a regular file", 0);
    } else if (makedev(sx.stx_dev_major, sx.stx_dev_minor) != op->dev) {
      close(fd);
      recv_fail(op, "the descriptor's file is not on the unit's filesystem", 0);
    } else if (flags < 0 || (flags & O_PATH) || ((flags & O_ACCMODE) != O_RDONLY && (flags & O_ACCMODE) != O_RDWR)) {
      close(fd);
      recv_fail(op, "the descriptor is not open for reading", 0);
    } else {
      op->fd = fd;
      op->size = (int64_t)sx.stx_size;
    }
    goto done;
  }
done:
  close(op->sock);
  /* op is freed by the callback on node's thread, which may run before the release: not read after. */
  napi_threadsafe_function tsfn = op->tsfn;
  napi_call_threadsafe_function(tsfn, op, napi_tsfn_blocking);
  napi_release_threadsafe_function(tsfn, napi_tsfn_release);
  return NULL;
}

static void recv_call_js(napi_env env, napi_value cb, void *context, void *data) {
  (void)context;
  struct recv_op *op = data;
  if (env && cb) {
    napi_value argv[3], undefined;
    napi_get_undefined(env, &undefined);
    if (op->fd >= 0) napi_get_null(env, &argv[0]);
    else napi_create_string_utf8(env, op->err, NAPI_AUTO_LENGTH, &argv[0]);
    napi_create_int32(env, op->fd, &argv[1]);
    napi_create_double(env, (double)(op->fd >= 0 ? op->size : 0), &argv[2]);
    napi_call_function(env, undefined, cb, 3, argv, NULL);
  } else if (op->fd >= 0) {
    close(op->fd); /* the environment is going away: nobody will take it */
  }
  free(op);
}

static int start_thread(void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  int r = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return r;
}

static napi_value receive(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "receive(sock, dev, timeoutMs, cb)");
    return NULL;
  }
  int32_t sock, timeout;
  double dev;
  CHECK(napi_get_value_int32(env, argv[0], &sock));
  CHECK(napi_get_value_double(env, argv[1], &dev));
  CHECK(napi_get_value_int32(env, argv[2], &timeout));
  int own = fcntl(sock, F_DUPFD_CLOEXEC, 3);
  if (own < 0) {
    napi_throw_error(env, NULL, "ums-fd-read: the agent's socket could not be duplicated");
    return NULL;
  }
  struct recv_op *op = calloc(1, sizeof *op);
  if (!op) {
    close(own);
    napi_throw_error(env, NULL, "ums-fd-read: out of memory");
    return NULL;
  }
  op->sock = own;
  op->dev = (uint64_t)dev;
  op->timeout_ms = timeout;
  napi_value name;
  CHECK(napi_create_string_utf8(env, "ums-fd-receive", NAPI_AUTO_LENGTH, &name));
  if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, NULL, NULL, NULL, recv_call_js, &op->tsfn) !=
      napi_ok) {
    close(own);
    free(op);
    napi_throw_error(env, NULL, "ums-fd-read: napi_create_threadsafe_function failed");
    return NULL;
  }
  if (start_thread(recv_thread, op) != 0) {
    napi_release_threadsafe_function(op->tsfn, napi_tsfn_abort);
    close(own);
    free(op);
    napi_throw_error(env, NULL, "ums-fd-read: no thread could be started");
    return NULL;
  }
  return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* send                                                                                            */

struct send_op {
  int fd, sock, efd;
  int64_t count, sent;
  int idle_ms;
  napi_threadsafe_function tsfn;
  char err[160];
  /* The thread and the JS handle each hold one; the last to let go frees it. */
  pthread_mutex_t lock;
  int refs;
  int done; /* the thread has ended: efd is closed */
};

static void send_unref(struct send_op *op) {
  pthread_mutex_lock(&op->lock);
  int left = --op->refs;
  pthread_mutex_unlock(&op->lock);
  if (left == 0) {
    pthread_mutex_destroy(&op->lock);
    free(op);
  }
}

static void *send_thread(void *arg) {
  struct send_op *op = arg;
  int64_t last = now_ms();
  off_t off = 0;
  while (op->sent < op->count) {
    int64_t want = op->count - op->sent;
    if (want > (1 << 30)) want = 1 << 30;
    ssize_t n = sendfile(op->sock, op->fd, &off, (size_t)want);
    if (n > 0) {
      op->sent += n;
      last = now_ms();
      continue;
    }
    if (n == 0) {
      snprintf(op->err, sizeof op->err, "short");
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      snprintf(op->err, sizeof op->err, "%s", strerror(errno));
      break;
    }
    struct pollfd p[2] = {{.fd = op->sock, .events = POLLOUT}, {.fd = op->efd, .events = POLLIN}};
    int left = (int)(last + op->idle_ms - now_ms());
    int r = left > 0 ? poll(p, 2, left) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(op->err, sizeof op->err, "poll: %s", strerror(errno));
      break;
    }
    if (p[1].revents) {
      snprintf(op->err, sizeof op->err, "cancelled");
      break;
    }
    if (r == 0) {
      snprintf(op->err, sizeof op->err, "idle");
      break;
    }
  }
  if (op->err[0]) shutdown(op->sock, SHUT_RDWR);
  close(op->sock);
  close(op->fd);
  pthread_mutex_lock(&op->lock);
  op->done = 1;
  close(op->efd);
  pthread_mutex_unlock(&op->lock);
  /* The callback drops the thread's reference to op (it may be freed then): not read after. */
  napi_threadsafe_function tsfn = op->tsfn;
  napi_call_threadsafe_function(tsfn, op, napi_tsfn_blocking);
  napi_release_threadsafe_function(tsfn, napi_tsfn_release);
  return NULL;
}

static void send_call_js(napi_env env, napi_value cb, void *context, void *data) {
  (void)context;
  struct send_op *op = data;
  if (env && cb) {
    napi_value argv[2], undefined;
    napi_get_undefined(env, &undefined);
    if (op->err[0]) napi_create_string_utf8(env, op->err, NAPI_AUTO_LENGTH, &argv[0]);
    else napi_get_null(env, &argv[0]);
    napi_create_double(env, (double)op->sent, &argv[1]);
    napi_call_function(env, undefined, cb, 2, argv, NULL);
  }
  send_unref(op);
}

static void send_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  send_unref(data);
}

static napi_value send_file(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) {
    napi_throw_type_error(env, NULL, "send(fd, sock, count, idleMs, cb)");
    return NULL;
  }
  int32_t fd, sock, idle;
  double count;
  CHECK(napi_get_value_int32(env, argv[0], &fd));
  CHECK(napi_get_value_int32(env, argv[1], &sock));
  CHECK(napi_get_value_double(env, argv[2], &count));
  CHECK(napi_get_value_int32(env, argv[3], &idle));
  struct send_op *op = calloc(1, sizeof *op);
  if (!op) {
    napi_throw_error(env, NULL, "ums-fd-read: out of memory");
    return NULL;
  }
  op->fd = fd;
  op->count = (int64_t)count;
  op->idle_ms = idle;
  op->sock = fcntl(sock, F_DUPFD_CLOEXEC, 3);
  op->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (op->sock < 0 || op->efd < 0) {
    if (op->sock >= 0) close(op->sock);
    if (op->efd >= 0) close(op->efd);
    free(op);
    napi_throw_error(env, NULL, "ums-fd-read: the client's socket could not be duplicated");
    return NULL;
  }
  pthread_mutex_init(&op->lock, NULL);
  op->refs = 2;
  napi_value name, handle;
  CHECK(napi_create_string_utf8(env, "ums-fd-send", NAPI_AUTO_LENGTH, &name));
  if (napi_create_threadsafe_function(env, argv[4], NULL, name, 0, 1, NULL, NULL, NULL, send_call_js, &op->tsfn) !=
          napi_ok ||
      napi_create_external(env, op, send_finalize, NULL, &handle) != napi_ok) {
    napi_throw_error(env, NULL, "ums-fd-read: the send could not be set up");
    return NULL; /* leaks op and its descriptors: napi is broken at this point */
  }
  if (start_thread(send_thread, op) != 0) {
    /* The handle's finalizer drops the JS reference; this drops the thread's. */
    close(op->sock);
    close(op->efd);
    op->done = 1;
    napi_release_threadsafe_function(op->tsfn, napi_tsfn_abort);
    send_unref(op);
    napi_throw_error(env, NULL, "ums-fd-read: no thread could be started");
    return NULL;
  }
  return handle;
}

static napi_value cancel(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *data = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "cancel(handle)");
    return NULL;
  }
  struct send_op *op = data;
  pthread_mutex_lock(&op->lock);
  if (!op->done) {
    uint64_t one = 1;
    ssize_t w = write(op->efd, &one, sizeof one);
    (void)w;
  }
  pthread_mutex_unlock(&op->lock);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"receive", NULL, receive, NULL, NULL, NULL, napi_default, NULL},
      {"send", NULL, send_file, NULL, NULL, NULL, napi_default, NULL},
      {"cancel", NULL, cancel, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
