/*
** input.h: opening a data file for reading, shared by the readers.
*/
#ifndef BBB_INPUT_H
#define BBB_INPUT_H

#include <stdint.h>

#include "engine/runtime.h"

/* Opens an input file for reading: a regular file, checked with stat
** before it is opened (a FIFO would block the open) and with fstat after
** (the path may have changed in between). what names the caller in
** messages ("load", "idx"). *fd and *size on success. */
int bbb_open_input(const char *path, const char *what, int *fd, uint64_t *size);

/* What path is, without opening it: "file", "directory", "fifo", "device",
** "socket", "other", or NULL when it cannot be stat'ed (errno is kept). */
const char *bbb_path_kind(const char *path);

#endif
