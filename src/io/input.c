/*
** input.c: opening a data file for reading, the one checked way every
** reader (IDX, CSV, R data, safetensors) takes, so each refuses a directory,
** a FIFO or a device with the same messages.
*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/input.h"

static const char *mode_kind(mode_t m) {
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISFIFO(m) ? "fifo"
       : (S_ISCHR(m) || S_ISBLK(m)) ? "device" : S_ISSOCK(m) ? "socket" : "other";
}

const char *bbb_path_kind(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? mode_kind(sb.st_mode) : NULL;
}

static int not_regular(const char *path, const char *what, mode_t m) {
  const char *k = mode_kind(m);
  if (S_ISDIR(m)) return bbb_error(BBB_EIO, "%s: '%s' is a directory, not a file", what, path);
  return bbb_error(BBB_EIO, "%s: '%s' is not a regular file (it is a %s)", what, path, k);
}

int bbb_open_input(const char *path, const char *what, int *fd, uint64_t *size) {
  struct stat sb;
  *fd = -1;
  if (stat(path, &sb) != 0)
    return bbb_error(BBB_EIO, "%s: cannot open '%s': %s", what, path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return not_regular(path, what, sb.st_mode);
  /* O_NONBLOCK: should a FIFO have taken the file's place since the stat,
  ** the open returns at once and the fstat below refuses it. */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return bbb_error(BBB_EIO, "%s: cannot open '%s': %s", what, path, strerror(errno));
  int st = BBB_OK;
  if (fstat(f, &sb) != 0)
    st = bbb_error(BBB_EIO, "%s: cannot read '%s': %s", what, path, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    st = not_regular(path, what, sb.st_mode);
  if (st) { close(f); return st; }
  fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK);
  *fd = f;
  *size = (uint64_t)sb.st_size;
  return BBB_OK;
}
