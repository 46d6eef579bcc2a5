/*
 * `df` in a unit shows the unit's disk, not the pool's (issue #20 part 4).
 *
 * A unit's files live on a btrfs subvolume of a pool that all units share, and statfs(2) on btrfs
 * reports the whole pool. A unit's disk size is the limit of its btrfs quota group, whose kernel
 * counters are in sysfs (/sys/fs/btrfs/<uuid>/qgroups/1_<n>/{referenced,max_referenced}); the host
 * names the unit's group in /.unit/policy/disk, a host-owned file the unit reads but cannot write.
 *
 * Loaded into every dynamically linked (glibc) process of the unit through /etc/ld.so.preload,
 * which the host binds read-only over the unit's own. It replaces the statfs family: the kernel's
 * answer is kept, except that for the unit's root filesystem (btrfs, same f_fsid as "/") the size
 * becomes the group's limit and the free space what is left of it (never more than the pool has).
 * It is presentation only: the quota group is what enforces the limit (EDQUOT), whatever a process
 * does with this library (a static binary or a cleared ld.so.preload sees the pool's figures).
 *
 * Built against old symbol versions only (syscall, open, read, close): no dlsym, so the library
 * loads in images whose glibc is older than the host's. 64-bit Linux only: there statfs64 is
 * statfs and statvfs64 is statvfs.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BTRFS_SUPER_MAGIC 0x9123683E
#define DISK_FILE "/.unit/policy/disk"
#define SYS_PREFIX "/sys/fs/btrfs/"

static int same_fsid(const struct statfs *a, const struct statfs *b) {
  return a->f_fsid.__val[0] == b->f_fsid.__val[0] && a->f_fsid.__val[1] == b->f_fsid.__val[1];
}

/* Reads a small file into buf (NUL-terminated, trailing newline dropped); its length or -1. */
static long read_small(const char *path, char *buf, long size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  long n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
  return n;
}

/* A decimal counter of the group: its value, or -1. */
static long long read_counter(const char *dir, long dir_len, const char *name) {
  char path[512];
  long i = 0;
  for (long j = 0; j < dir_len && i < (long)sizeof(path) - 1; j++) path[i++] = dir[j];
  if (i < (long)sizeof(path) - 1) path[i++] = '/';
  for (const char *p = name; *p && i < (long)sizeof(path) - 1; p++) path[i++] = *p;
  path[i] = 0;
  char text[32];
  if (read_small(path, text, sizeof(text)) <= 0) return -1;
  long long v = 0;
  for (const char *p = text; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

/* The group's directory as the host named it: under /sys/fs/btrfs/, with no "..". */
static long group_dir(char *dir, long size) {
  long n = read_small(DISK_FILE, dir, size);
  if (n <= (long)sizeof(SYS_PREFIX) - 1) return -1;
  for (long i = 0; i < (long)sizeof(SYS_PREFIX) - 1; i++)
    if (dir[i] != SYS_PREFIX[i]) return -1;
  for (long i = 0; i + 1 < n; i++)
    if (dir[i] == '.' && dir[i + 1] == '.') return -1;
  return n;
}

static void adjust(struct statfs *b) {
  if ((unsigned long)b->f_type != BTRFS_SUPER_MAGIC) return;
  struct statfs root;
  if (syscall(SYS_statfs, "/", &root) != 0 || !same_fsid(&root, b)) return;
  char dir[256];
  long len = group_dir(dir, sizeof(dir));
  if (len < 0) return;
  long long limit = read_counter(dir, len, "max_referenced");
  long long used = read_counter(dir, len, "referenced");
  /* No limit: the kernel shows 0 or a huge value; keep the pool's figures then. */
  if (limit <= 0 || used < 0 || limit >= (1LL << 62)) return;
  unsigned long long unit = b->f_frsize ? (unsigned long long)b->f_frsize : (unsigned long long)b->f_bsize;
  if (unit == 0) return;
  unsigned long long blocks = (unsigned long long)limit / unit;
  unsigned long long taken = ((unsigned long long)used + unit - 1) / unit;
  unsigned long long left = blocks > taken ? blocks - taken : 0;
  b->f_blocks = blocks;
  if (left < (unsigned long long)b->f_bfree) b->f_bfree = left;
  if (left < (unsigned long long)b->f_bavail) b->f_bavail = left;
}

int statfs(const char *path, struct statfs *buf) {
  long r = syscall(SYS_statfs, path, buf);
  if (r == 0) adjust(buf);
  return (int)r;
}

int fstatfs(int fd, struct statfs *buf) {
  long r = syscall(SYS_fstatfs, fd, buf);
  if (r == 0) adjust(buf);
  return (int)r;
}

int statfs64(const char *path, struct statfs64 *buf) { return statfs(path, (struct statfs *)buf); }
int fstatfs64(int fd, struct statfs64 *buf) { return fstatfs(fd, (struct statfs *)buf); }

/* As glibc builds a statvfs from a statfs (its f_flags carry ST_VALID since Linux 2.6.36). */
static void to_statvfs(const struct statfs *s, struct statvfs *v) {
  v->f_bsize = s->f_bsize;
  v->f_frsize = s->f_frsize ? s->f_frsize : s->f_bsize;
  v->f_blocks = s->f_blocks;
  v->f_bfree = s->f_bfree;
  v->f_bavail = s->f_bavail;
  v->f_files = s->f_files;
  v->f_ffree = s->f_ffree;
  v->f_favail = s->f_ffree;
  v->f_fsid = (unsigned long)(unsigned int)s->f_fsid.__val[0] | ((unsigned long)(unsigned int)s->f_fsid.__val[1] << 32);
  v->f_flag = (unsigned long)s->f_flags & ~(unsigned long)0x0020; /* ST_VALID */
  v->f_namemax = s->f_namelen;
  for (unsigned i = 0; i < sizeof(v->__f_spare) / sizeof(v->__f_spare[0]); i++) v->__f_spare[i] = 0;
}

int statvfs(const char *path, struct statvfs *buf) {
  struct statfs s;
  int r = statfs(path, &s);
  if (r == 0) to_statvfs(&s, buf);
  return r;
}

int fstatvfs(int fd, struct statvfs *buf) {
  struct statfs s;
  int r = fstatfs(fd, &s);
  if (r == 0) to_statvfs(&s, buf);
  return r;
}

int statvfs64(const char *path, struct statvfs64 *buf) { return statvfs(path, (struct statvfs *)buf); }
int fstatvfs64(int fd, struct statvfs64 *buf) { return fstatvfs(fd, (struct statvfs *)buf); }
