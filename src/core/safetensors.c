/*
** safetensors.c: atomic checkpoint writes and bounds-checked reads.
*/
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (float32 data is copied as is)"
#endif

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

/* A temporary file of a save is "<target>.bbb-tmp.<pid>.XXXXXX": a save
** killed half way (SIGKILL, a power cut) leaves one behind. The next save of
** the same target removes those whose process is gone. */
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
static int check_target(const char *path, mode_t *mode, int *exists) {
  struct stat sb;
  *exists = 0;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT) return BBB_OK;
    return bbb_error(BBB_EIO, "save: cannot write '%s': %s", path, strerror(errno));
  }
  const char *what = S_ISREG(sb.st_mode) ? NULL : S_ISDIR(sb.st_mode) ? "a folder"
                   : S_ISLNK(sb.st_mode) ? "a symbolic link" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                   : S_ISSOCK(sb.st_mode) ? "a socket" : "a device";
  if (what)
    return bbb_error(BBB_EIO, "save: '%s' is %s, not a regular file: refusing to replace it", path, what);
  *exists = 1;
  *mode = sb.st_mode & 07777;
  return BBB_OK;
}

int bbb_st_save(const char *path, const char *header, uint64_t header_len,
                bbb_tensor *const *tensors, int n) {
  mode_t mode = 0;
  int exists;
  int st = check_target(path, &mode, &exists);
  if (st != BBB_OK) return st;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64), *dir = folder_of(path);
  if (!tmp || !dir) {
    free(tmp); free(dir);
    return bbb_error(BBB_EMEM, "save: out of memory");
  }
  remove_stale_temporaries(dir, path);
  snprintf(tmp, plen + 64, "%s" TMP_MARK "%ld.XXXXXX", path, (long)getpid());
  int fd = mkstemp(tmp);
  if (fd < 0) {
    st = bbb_error(BBB_EIO, "save: cannot create a temporary file next to '%s': %s",
                   path, strerror(errno));
    free(tmp); free(dir);
    return st;
  }
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)(header_len >> (8 * k));
  if (write_all(fd, len8, 8) || write_all(fd, header, header_len)) goto io_error;
  for (int i = 0; i < n; i++) {
    const bbb_tensor *t = tensors[i];
    if (write_all(fd, bbb_data(t), (size_t)t->numel * sizeof(bbb_float))) goto io_error;
  }
  if (fsync(fd) != 0) goto io_error;
  if (close(fd) != 0) { fd = -1; goto io_error; }
  fd = -1;
  if (!exists) {   /* 0666 less the umask, as a file made by fopen would have */
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
  st = bbb_error(BBB_EIO, "save: cannot write '%s': %s", path, strerror(errno));
  if (fd >= 0) close(fd);
  unlink(tmp);
  free(tmp); free(dir);
  return st;
}

/* Opens path for reading and returns its size; a folder or a device is an
** error of its own. */
static int open_regular(const char *path, FILE **f, uint64_t *size) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return bbb_error(BBB_EIO, "load: cannot open '%s': %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return bbb_error(BBB_EIO, "load: '%s' is a directory", path);
  if (!S_ISREG(sb.st_mode)) return bbb_error(BBB_EIO, "load: '%s' is not a regular file", path);
  *f = fopen(path, "rb");
  if (!*f) return bbb_error(BBB_EIO, "load: cannot open '%s': %s", path, strerror(errno));
  *size = (uint64_t)sb.st_size;
  return BBB_OK;
}

int bbb_st_read_header(const char *path, char **header, uint64_t *header_len,
                       uint64_t *data_len) {
  FILE *f;
  uint64_t size, hl = 0;
  *header = NULL;
  int st = open_regular(path, &f, &size);
  if (st) return st;
  unsigned char len8[8];
  if (size < 8 || fread(len8, 1, 8, f) != 8) {
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s' is too short for a safetensors header (%llu bytes)",
                     path, (unsigned long long)size);
  }
  for (int k = 0; k < 8; k++) hl |= (uint64_t)len8[k] << (8 * k);
  if (hl > size - 8) {
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s' declares a %llu-byte header but holds only %llu bytes "
                     "after the length field", path, (unsigned long long)hl,
                     (unsigned long long)(size - 8));
  }
  if (hl > BBB_ST_MAX_HEADER) {
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s' declares a %llu-byte header (at most %llu)", path,
                     (unsigned long long)hl, (unsigned long long)BBB_ST_MAX_HEADER);
  }
  char *h = malloc((size_t)hl + 1);
  if (!h) { fclose(f); return bbb_error(BBB_EMEM, "load: out of memory for the header"); }
  if (fread(h, 1, (size_t)hl, f) != (size_t)hl) {
    free(h); fclose(f);
    return bbb_error(BBB_EIO, "load: '%s' could not be read: %s", path, strerror(errno));
  }
  h[hl] = '\0';
  fclose(f);
  *header = h;
  *header_len = hl;
  *data_len = size - 8 - hl;
  return BBB_OK;
}

int bbb_st_read_tensor(bbb_tensor **out, const char *path, uint64_t data_start,
                       uint64_t begin, uint64_t end, int ndim, const int64_t *shape) {
  int64_t numel;
  *out = NULL;
  int st = bbb_shape_check(ndim, shape, &numel);
  if (st) return st;
  FILE *f;
  uint64_t size;
  if ((st = open_regular(path, &f, &size))) return st;
  if (begin > end || data_start > size || end > size - data_start) {
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s': data range [%llu, %llu) lies outside the file",
                     path, (unsigned long long)begin, (unsigned long long)end);
  }
  if (end - begin != (uint64_t)numel * sizeof(bbb_float)) {
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s': %llu data bytes do not hold %lld float32 values",
                     path, (unsigned long long)(end - begin), (long long)numel);
  }
  bbb_tensor *t = bbb_tensor_new(ndim, shape);
  if (!t) { fclose(f); return BBB_EMEM; }
  if (numel > 0 && (fseeko(f, (off_t)(data_start + begin), SEEK_SET) != 0
                    || fread(bbb_data(t), sizeof(bbb_float), (size_t)numel, f) != (size_t)numel)) {
    bbb_tensor_release(t);
    fclose(f);
    return bbb_error(BBB_EIO, "load: '%s' could not be read: %s", path, strerror(errno));
  }
  fclose(f);
  *out = t;
  return BBB_OK;
}
