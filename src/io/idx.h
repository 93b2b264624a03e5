/*
** idx.h: reading IDX files (the MNIST format), raw or gzipped.
*/
#ifndef BBB_IDX_H
#define BBB_IDX_H

#include <stddef.h>

#include "engine/tensor.h"

/* The default cap on an IDX file's data bytes (gzip output above all). */
#define BBB_IDX_MAX_BYTES ((uint64_t)2 << 30)

typedef struct {
  double scale, offset;   /* each byte becomes byte * scale + offset */
  int64_t limit;          /* at most this many items (first dimension); < 0: all */
  uint64_t max_bytes;     /* refuse files declaring more data bytes than this */
} bbb_idx_opts;

/* scale 1, offset 0, no limit, max_bytes BBB_IDX_MAX_BYTES. */
bbb_idx_opts bbb_idx_defaults(void);

/* Loads an IDX file of unsigned bytes as floats. Raw or gzip (by its magic
** bytes). Every header field is checked, and the declared size must match
** the file size (raw) or the gzip trailer (gzip) before any allocation; data
** beyond the declared size, bytes after the gzip stream, a truncated or
** corrupt stream and a directory are errors with their own messages. The
** bytes are converted in chunks of 64 KiB, so only the floats are held. */
int bbb_idx_load_opts(bbb_tensor **out, const char *path, const bbb_idx_opts *o);

/* The same from memory; name is used in messages. */
int bbb_idx_parse_mem(bbb_tensor **out, const unsigned char *data, size_t len, const char *name,
                      const bbb_idx_opts *o);

/* bbb_idx_load_opts with the default max_bytes. */
int bbb_idx_load(bbb_tensor **out, const char *path, double scale, double offset, int64_t limit);

#endif
