/*
 * ums-fd-send.node: passes an open file's descriptor to the host (issue #16 part 1).
 *
 * A large raw read (fs/raw-read.ts) can go as the descriptor of the file the agent opened and checked,
 * sent with SCM_RIGHTS on the host's connection, instead of as its bytes: the host then sends the file
 * to its client with sendfile(2) (packages/server/src/native/fd-read.c, which trusts nothing of it).
 *
 * Exports:
 *   send(sock, fd) -> 0 or -errno
 *     one byte ("F") carrying `fd` on the connected Unix socket `sock`, without waiting (the socket
 *     is idle at that point: the host has read all before and waits for this byte).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <node_api.h>
#include <string.h>
#include <sys/socket.h>

static napi_value send_fd(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], out;
  int32_t sock, fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_int32(env, argv[0], &sock) != napi_ok || napi_get_value_int32(env, argv[1], &fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "send(sock, fd)");
    return NULL;
  }
  char byte = 'F';
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  napi_create_int32(env, n == 1 ? 0 : n < 0 ? -errno : -EIO, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {{"send", NULL, send_fd, NULL, NULL, NULL, napi_default, NULL}};
  napi_define_properties(env, exports, 1, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
