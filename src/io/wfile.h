/*
** wfile.h: the one way bbb writes a file (wfile.c).
*/
#ifndef BBB_WFILE_H
#define BBB_WFILE_H

#include <stddef.h>

/* Writes parts[0..n) (lens bytes each) to path as a whole or not at all: a
** temporary file beside it, fsync, a rename over it, and an fsync of the
** folder. On failure the old file stays, the temporary goes, and the error
** (prefixed by who, "save" or "write") names the file and the reason. A
** target that is not a regular file (a folder, link, FIFO, device) is
** refused; a replaced file keeps its mode. */
int bbb_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n, const char *who);

#endif
