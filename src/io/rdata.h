/*
** rdata.h: a small reader of R's serialization format (version 2, XDR,
** versions 2 and 3, XDR, optionally xz-compressed, as in .rda/.RData files, and
** installed packages' lazy-load databases data/Rdata.rdx + Rdata.rdb) for
** one kind of object: a data frame (or tibble) of numbers, factors and
** strings. Everything is bounds checked; a truncated or hostile file is an
** error, never a crash.
*/
#ifndef BBB_RDATA_H
#define BBB_RDATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct bbb_rdata_factor {
  const char *name;            /* the column name */
  int numeric;                 /* 1: values below; 0: a factor (strings become one) */
  int n_levels;
  const char **levels;         /* n_levels strings */
  int32_t *codes;              /* n_rows codes: 1..n_levels, 0 for NA */
  double *values;              /* numeric: n_rows values, NaN for NA */
} bbb_rdata_factor;

typedef struct bbb_rdata_frame {
  const char *object_name;     /* the name the object was saved under */
  int64_t n_rows;
  int n_cols;
  bbb_rdata_factor *cols;      /* n_cols columns */
  void *arena;                 /* owns every byte above */
} bbb_rdata_frame;

/* Parses the first object of an .rda image (xz-compressed or plain "RDX2")
** held in buf[0..len) into *out. On error *out is left empty (safe to free)
** and bbb_errmsg() says what was found where. */
int bbb_rdata_parse_frame(const unsigned char *buf, size_t len, bbb_rdata_frame *out);

/* The same from a file. */
int bbb_rdata_load_frame(const char *path, bbb_rdata_frame *out);

/* The data set `name` of a lazy-load database: the index (.rdx, gzip) and
** the database (.rdb) in memory, or from their files. */
int bbb_rdata_parse_lazy(const unsigned char *rdx, size_t rdx_len, const unsigned char *rdb, size_t rdb_len,
                         const char *name, bbb_rdata_frame *out);
int bbb_rdata_load_lazy(const char *rdx_path, const char *rdb_path, const char *name, bbb_rdata_frame *out);

/* Frees what a parse allocated; safe on an empty or failed frame. */
void bbb_rdata_frame_free(bbb_rdata_frame *f);

#endif
