/*
** csvread.h: a table of numbers and categories from a CSV file, parsed by
** Debian's libcsv (RFC 4180 quoting) and bounds-checked here: ragged rows,
** bad numbers, missing values, invalid UTF-8 and overlong fields are errors
** naming the row and the column, never a crash.
*/
#ifndef BBB_CSVREAD_H
#define BBB_CSVREAD_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"

#define BBB_CSV_MAX_FIELD ((size_t)1 << 20)   /* bytes in one field */

typedef struct bbb_csv_options {
  unsigned char delim, quote;      /* ',' and '"' by default */
  int header;                      /* 1: the first record names the columns */
  int drop_missing;                /* 1: drop rows with a missing value, 0: refuse them */
  int keep_missing;                /* 1: keep them, the cell as NaN (its imputation is the caller's) */
  int max_levels;                  /* distinct values a categorical column may take */
  const char *const *na;           /* strings that mean "missing" */
  int n_na;
  const char *const *categorical;  /* columns read as categories even when numeric */
  int n_categorical;
  const char *const *ignore;       /* columns skipped */
  int n_ignore;
  const char *target;              /* a column kept apart as y (NULL: none) */
} bbb_csv_options;

bbb_csv_options bbb_csv_defaults(void);

typedef struct bbb_csv_column {
  const char *name;
  int categorical;                 /* 0: numbers, 1: codes 1..n_levels */
  int n_levels;
  const char **levels;             /* in order of first appearance */
} bbb_csv_column;

typedef struct bbb_csv_table {
  int64_t n_rows;                  /* rows kept */
  int64_t n_dropped;               /* rows dropped for a missing value */
  int n_cols;                      /* columns of x, in file order */
  bbb_csv_column *cols;
  int has_target;
  bbb_csv_column target;
  bbb_tensor *x;                   /* (n_rows, n_cols): values, or codes of categories */
  bbb_tensor *y;                   /* (n_rows) when has_target */
  double *y_exact;                 /* (n_rows) a numeric target as parsed in double, or NULL */
  void *arena;                     /* owns names and levels */
} bbb_csv_table;

/* Read a file (streamed in blocks: memory holds the table, not the text)
** or a buffer. On error *out is empty (safe to free) and bbb_errmsg() says
** what was wrong, where. */
int bbb_csv_read(const char *path, const bbb_csv_options *o, bbb_csv_table *out);
int bbb_csv_parse(const unsigned char *buf, size_t len, const bbb_csv_options *o, bbb_csv_table *out);
void bbb_csv_free(bbb_csv_table *t);

/* The number in s[0..len) as the nearest float in *out: 0; -1 when s is
** not a plain decimal number ([+-] digits [. digits] [e [+-] digits]);
** BBB_CSV_OUT_OF_RANGE when it is one beyond the float range (1e39). */
#define BBB_CSV_OUT_OF_RANGE (-2)
int bbb_csv_parse_float(const char *s, size_t len, float *out);

#endif
