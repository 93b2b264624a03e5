/*
** wfile.c: bbb_write_atomic, the writer under checkpoints and every other
** file a script writes: a reader never sees half a file, and a failed write
** (a full disk, a file size limit) leaves the old one as it was.
*/
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/runtime.h"
#include "io/wfile.h"

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The folder of path ("." when it has none), for the temporary file and
** for the fsync that makes the rename durable. */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

/* A temporary file is "<target>.bbb-tmp.<pid>.XXXXXX": a write killed half
** way (SIGKILL, a power cut) leaves one behind. The next write of the same
** target removes those whose process is gone. */
#define TMP_MARK ".bbb-tmp."

static void remove_stale_temporaries(const char *dir, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t blen = strlen(base), mlen = strlen(TMP_MARK);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, TMP_MARK, mlen) != 0) continue;
    char *end;
    long pid = strtol(name + blen + mlen, &end, 10);
    if (end == name + blen + mlen || *end != '.' || pid <= 0) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* its writer may still run */
    size_t n = strlen(dir) + strlen(name) + 2;
    char *full = malloc(n);
    if (!full) break;
    snprintf(full, n, "%s/%s", dir, name);
    unlink(full);
    free(full);
  }
  closedir(d);
}

/* What is at path now: nothing, or a regular file whose mode the new file
** keeps. Anything else (a folder, a symbolic link, a FIFO, a device) is
** refused: replacing it by a rename would destroy what it is. */
static int check_target(const char *path, const char *who, mode_t *mode, int *exists) {
  struct stat sb;
  *exists = 0;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT) return BBB_OK;
    return bbb_error(BBB_EIO, "%s: cannot write '%s': %s", who, path, strerror(errno));
  }
  const char *what = S_ISREG(sb.st_mode) ? NULL : S_ISDIR(sb.st_mode) ? "a folder"
                   : S_ISLNK(sb.st_mode) ? "a symbolic link" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                   : S_ISSOCK(sb.st_mode) ? "a socket" : "a device";
  if (what)
    return bbb_error(BBB_EIO, "%s: '%s' is %s, not a regular file: refusing to replace it", who, path, what);
  *exists = 1;
  *mode = sb.st_mode & 07777;
  return BBB_OK;
}

/* The temporary's bytes, made durable, and its mode: the replaced file's,
** or 0666 less the umask as a file made by fopen would have. */
static int fill(int fd, const void *const *parts, const size_t *lens, int n) {
  for (int i = 0; i < n; i++)
    if (write_all(fd, parts[i], lens[i])) return -1;
  return fsync(fd);
}

int bbb_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n, const char *who) {
  mode_t mode = 0;
  int exists;
  int st = check_target(path, who, &mode, &exists);
  if (st != BBB_OK) return st;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64), *dir = folder_of(path);
  if (!tmp || !dir) {
    free(tmp); free(dir);
    return bbb_error(BBB_EMEM, "%s: out of memory", who);
  }
  remove_stale_temporaries(dir, path);
  snprintf(tmp, plen + 64, "%s" TMP_MARK "%ld.XXXXXX", path, (long)getpid());
  int fd = mkstemp(tmp);
  if (fd < 0) {
    st = bbb_error(BBB_EIO, "%s: cannot create a temporary file next to '%s': %s", who, path, strerror(errno));
    free(tmp); free(dir);
    return st;
  }
  if (fill(fd, parts, lens, n)) goto io_error;
  if (close(fd) != 0) { fd = -1; goto io_error; }
  fd = -1;
  if (!exists) {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  chmod(tmp, mode);   /* a replaced file keeps its mode (a 0600 checkpoint stays 0600) */
  if (rename(tmp, path) != 0) goto io_error;
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) { fsync(dfd); close(dfd); }
  free(tmp); free(dir);
  return BBB_OK;
io_error:
  st = bbb_error(BBB_EIO, "%s: cannot write '%s': %s", who, path, strerror(errno));
  if (fd >= 0) close(fd);
  unlink(tmp);
  free(tmp); free(dir);
  return st;
}
