/*
 * ums-view: shows and hides checkpoint snapshots in a unit's checkpoint view (issue #16 part 4).
 *
 * The host side of /.unit/checkpoints is a shared mount in the unit's run dir; binds made in it
 * propagate into the running unit (runtime/runc/checkpoint-view.ts has the design). Each bind must
 * be read-only from the moment it exists: a snapshot is bound in STAGING (a private mount that
 * propagates nowhere), that bind is remounted read-only and checked, and only then bound into VIEW
 * (a bind copies its source's flags). mount(8) does the same in three runs per checkpoint, which
 * the server started one after another (each a process start of a few milliseconds, and a read of
 * the host's mount table to check the result): this does all of a refresh in one process, and
 * checks each mount's flags with statvfs(2) on it.
 *
 * Usage: ums-view SNAPSHOTS STAGING VIEW OP...
 *   +ID  binds SNAPSHOTS/ID at VIEW/ID, read-only (made in STAGING/ID first, removed after);
 *   -ID  unbinds VIEW/ID if it is a mount (lazily, as umount -l) and removes the directory.
 * ID is a checkpoint id (v followed by digits): anything else refuses the whole run (exit 2) before
 * any is done. The paths are the host's own (the unit's run dir and its snapshots directory), never
 * a path the unit can write. Operations run in order; the
 * first failure is reported on stderr ("ums-view: ID: what: why") and ends the run with exit 1,
 * leaving no bind of that ID in STAGING or VIEW.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef UMOUNT_NOFOLLOW
#define UMOUNT_NOFOLLOW 8
#endif

static const char *snapshots, *staging, *view;

static int fail(const char *id, const char *what, int err) {
  fprintf(stderr, "ums-view: %s: %s%s%s\n", id, what, err ? ": " : "", err ? strerror(err) : "");
  return 1;
}

static int valid_id(const char *id) {
  if (id[0] != 'v' || id[1] == '\0') return 0;
  for (const char *p = id + 1; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return strlen(id) < 32;
}

/* DIR/ID into `out`; false when it does not fit (never a truncated path). */
static int join(char *out, const char *dir, const char *id) {
  int n = snprintf(out, PATH_MAX, "%s/%s", dir, id);
  return n > 0 && n < PATH_MAX;
}

/* The mount(2) flags of statvfs(3)'s per-mount flags that a bind remount keeps (most have the
   same value in both; relatime does not). */
static unsigned long kept_flags(unsigned long st) {
  unsigned long ms = 0;
  if (st & ST_NOSUID) ms |= MS_NOSUID;
  if (st & ST_NODEV) ms |= MS_NODEV;
  if (st & ST_NOEXEC) ms |= MS_NOEXEC;
  if (st & ST_NOATIME) ms |= MS_NOATIME;
  if (st & ST_NODIRATIME) ms |= MS_NODIRATIME;
  if (st & ST_RELATIME) ms |= MS_RELATIME;
  return ms;
}

/* Whether the mount at `path` is read-only (statvfs reports the flags of the mount it lands on). */
static int read_only(const char *path) {
  struct statvfs sv;
  return statvfs(path, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

/* Undoes a bind of this run (lazily, as umount -l); a failure shows in the caller's report. */
static void unbind(const char *path) { umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW); }

static int show(const char *id) {
  char src[PATH_MAX], staged[PATH_MAX], target[PATH_MAX];
  if (!join(src, snapshots, id) || !join(staged, staging, id) || !join(target, view, id))
    return fail(id, "path too long", ENAMETOOLONG);
  if (mkdir(staged, 0755) != 0 && errno != EEXIST) return fail(id, "mkdir in staging", errno);
  if (mkdir(target, 0755) != 0 && errno != EEXIST) return fail(id, "mkdir in the view", errno);
  if (mount(src, staged, NULL, MS_BIND, NULL) != 0) {
    int err = errno;
    rmdir(staged);
    return fail(id, "bind in staging", err);
  }
  /* A bind remount replaces the mount's flags: keep those it has (nosuid, nodev, ...), add ro. */
  struct statvfs sv;
  unsigned long keep = 0;
  if (statvfs(staged, &sv) == 0) keep = kept_flags(sv.f_flag);
  int rc = mount(NULL, staged, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL);
  int err = errno;
  if (rc != 0 || !read_only(staged)) {
    unbind(staged);
    rmdir(staged);
    return fail(id, "the staged bind is not read-only", rc != 0 ? err : 0);
  }
  rc = mount(staged, target, NULL, MS_BIND, NULL);
  err = errno;
  int ok = rc == 0 && read_only(target);
  if (rc == 0 && !ok) unbind(target);
  unbind(staged);
  rmdir(staged);
  if (!ok) return fail(id, rc != 0 ? "bind in the view" : "the bind in the view is not read-only", rc != 0 ? err : 0);
  return 0;
}

static int hide(const char *id) {
  char target[PATH_MAX];
  if (!join(target, view, id)) return fail(id, "path too long", ENAMETOOLONG);
  if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT)
    return fail(id, "unbind from the view", errno);
  if (rmdir(target) != 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
    return fail(id, "rmdir in the view", errno);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: ums-view SNAPSHOTS STAGING VIEW [+ID|-ID]...\n");
    return 2;
  }
  snapshots = argv[1];
  staging = argv[2];
  view = argv[3];
  /* All checked before any is done. */
  for (int i = 4; i < argc; i++) {
    const char *op = argv[i];
    if ((op[0] != '+' && op[0] != '-') || !valid_id(op + 1)) {
      fprintf(stderr, "ums-view: not an operation: '%s' (+ID or -ID, ID a checkpoint id)\n", op);
      return 2;
    }
  }
  for (int i = 4; i < argc; i++)
    if ((argv[i][0] == '+' ? show(argv[i] + 1) : hide(argv[i] + 1)) != 0) return 1;
  return 0;
}
