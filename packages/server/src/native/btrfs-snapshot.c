/*
 * ums-btrfs.node: a btrfs snapshot made with its ioctl, on a thread (issue #16 part 4).
 *
 * `btrfs subvolume snapshot` run from the server cost 6-9 ms of which the ioctl is 2-3: the rest is
 * the fork of a large node process and the tool's start. Every create, fork, restore and checkpoint
 * makes one. This makes the same BTRFS_IOC_SNAP_CREATE_V2 call the tool makes, on a thread of its own
 * (the call commits a transaction: it can wait on the disk, never on node's thread or its pool).
 *
 * Paths are the host's own (the pool's directories, never one inside a unit's rootfs), opened
 * without following a link at their last component; `name` is a single component.
 *
 * Exports:
 *   snapshot(src, dstDir, name, readonly, qgroup, cb(err, code))
 *     snapshots subvolume `src` as `dstDir/name`; read-only when `readonly`; with `qgroup` ("L/ID",
 *     or "" for none) the new subvolume is added to that quota group (the tool's `-i`). err: null, or
 *     the failure's text with `code` its errno name (EEXIST, ENOENT, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <node_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct snap_op {
  char src[4096], dst_dir[4096], name[BTRFS_SUBVOL_NAME_MAX + 1];
  int readonly;
  unsigned long long qgroup; /* 0: none */
  napi_threadsafe_function tsfn;
  char err[4200];
  int code;
};

static void fail(struct snap_op *op, const char *what, int err) {
  op->code = err;
  snprintf(op->err, sizeof op->err, "%.4096s: %.80s", what, strerror(err));
}

static void *snap_thread(void *arg) {
  struct snap_op *op = arg;
  int src = open(op->src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int dst = src < 0 ? -1 : open(op->dst_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0) fail(op, op->src, errno);
  else if (dst < 0) fail(op, op->dst_dir, errno);
  else {
    struct btrfs_ioctl_vol_args_v2 args;
    memset(&args, 0, sizeof args);
    args.fd = src;
    if (op->readonly) args.flags |= BTRFS_SUBVOL_RDONLY;
    struct {
      struct btrfs_qgroup_inherit head;
      __u64 one;
    } inherit;
    if (op->qgroup) {
      memset(&inherit, 0, sizeof inherit);
      inherit.head.num_qgroups = 1;
      inherit.one = op->qgroup;
      args.flags |= BTRFS_SUBVOL_QGROUP_INHERIT;
      args.size = sizeof inherit;
      args.qgroup_inherit = &inherit.head;
    }
    memcpy(args.name, op->name, strlen(op->name) + 1); /* checked: at most BTRFS_SUBVOL_NAME_MAX */
    if (ioctl(dst, BTRFS_IOC_SNAP_CREATE_V2, &args) != 0) fail(op, "BTRFS_IOC_SNAP_CREATE_V2", errno);
  }
  if (src >= 0) close(src);
  if (dst >= 0) close(dst);
  /* op is freed by the callback on node's thread: not read after the call. */
  napi_threadsafe_function tsfn = op->tsfn;
  napi_call_threadsafe_function(tsfn, op, napi_tsfn_blocking);
  napi_release_threadsafe_function(tsfn, napi_tsfn_release);
  return NULL;
}

static const char *errno_name(int e) {
  switch (e) {
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case ELOOP: return "ELOOP";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EXDEV: return "EXDEV";
    case ENOTTY: return "ENOTTY";
    case EROFS: return "EROFS";
    default: return "EIO";
  }
}

static void snap_call_js(napi_env env, napi_value cb, void *context, void *data) {
  (void)context;
  struct snap_op *op = data;
  if (env && cb) {
    napi_value argv[2], undefined;
    napi_get_undefined(env, &undefined);
    if (op->err[0]) {
      napi_create_string_utf8(env, op->err, NAPI_AUTO_LENGTH, &argv[0]);
      napi_create_string_utf8(env, errno_name(op->code), NAPI_AUTO_LENGTH, &argv[1]);
    } else {
      napi_get_null(env, &argv[0]);
      napi_get_null(env, &argv[1]);
    }
    napi_call_function(env, undefined, cb, 2, argv, NULL);
  }
  free(op);
}

static int get_string(napi_env env, napi_value v, char *out, size_t size) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, out, size, &len) != napi_ok) return -1;
  return len + 1 >= size ? -1 : 0; /* truncated: refused */
}

static napi_value snapshot(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  char qgroup[64];
  bool readonly = false;
  struct snap_op *op = calloc(1, sizeof *op);
  if (!op || napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6 ||
      get_string(env, argv[0], op->src, sizeof op->src) || get_string(env, argv[1], op->dst_dir, sizeof op->dst_dir) ||
      get_string(env, argv[2], op->name, sizeof op->name) || napi_get_value_bool(env, argv[3], &readonly) != napi_ok ||
      get_string(env, argv[4], qgroup, sizeof qgroup) || !op->name[0] || strchr(op->name, '/') ||
      !strcmp(op->name, ".") || !strcmp(op->name, "..")) {
    free(op);
    napi_throw_type_error(env, NULL, "snapshot(src, dstDir, name, readonly, qgroup, cb): a name is one component");
    return NULL;
  }
  op->readonly = readonly;
  if (qgroup[0]) {
    unsigned long long level, id;
    char rest;
    if (sscanf(qgroup, "%llu/%llu%c", &level, &id, &rest) != 2 || level > 0xffff || id >> 48) {
      free(op);
      napi_throw_type_error(env, NULL, "snapshot: qgroup is LEVEL/ID");
      return NULL;
    }
    op->qgroup = (level << 48) | id;
  }
  napi_value name;
  napi_create_string_utf8(env, "ums-btrfs-snapshot", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[5], NULL, name, 0, 1, NULL, NULL, NULL, snap_call_js, &op->tsfn) !=
      napi_ok) {
    free(op);
    napi_throw_error(env, NULL, "ums-btrfs: napi_create_threadsafe_function failed");
    return NULL;
  }
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  int r = pthread_create(&t, &attr, snap_thread, op);
  pthread_attr_destroy(&attr);
  if (r != 0) {
    napi_release_threadsafe_function(op->tsfn, napi_tsfn_abort);
    free(op);
    napi_throw_error(env, NULL, "ums-btrfs: no thread could be started");
  }
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {{"snapshot", NULL, snapshot, NULL, NULL, NULL, napi_default, NULL}};
  napi_define_properties(env, exports, 1, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
