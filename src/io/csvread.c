/*
** csvread.c: CSV to a float table on libcsv (Debian's libcsv-dev).
**
** libcsv does the RFC 4180 part (delimiters, quoted fields with doubled
** quotes and line breaks, strict checks on stray quotes) and calls back once
** per field and once per record. Here each field becomes a float: a number
** for a numeric column, a code 1..L for a categorical one. A column is
** numeric when its values parse as numbers, categorical when the caller
** names it so or its values are text. The stream sets the kind from the
** first value that is not missing, and the whole column holds it to that:
** a later value that is not a number in a numeric column is an error, and
** so is a column read as categories whose values are mostly numbers (one
** stray cell first, "12.5x" or "1,234", must not turn a feature into
** categories or a target into a hundred classes), whichever row it is in.
**
** Rows go into fixed-size blocks of pages of their own; at the end they are
** copied into the result tensor block by block, each block unmapped once
** copied, so memory peaks near one copy of the table (the tensor's pages
** are touched only as they are filled).
*/
#include <csv.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/arena.h"
#include "io/csvread.h"
#include "io/input.h"

#define BLOCK_BYTES ((size_t)4 << 20)
#define READ_BYTES ((size_t)1 << 20)
#define MAX_COLUMNS 100000

bbb_csv_options bbb_csv_defaults(void) {
  static const char *const na[] = { "", "NA", "N/A", "?" };
  bbb_csv_options o = { .delim = ',', .quote = '"', .header = 1, .drop_missing = 0,
                        .max_levels = 10000, .na = na, .n_na = 4 };
  return o;
}

/* ---- numbers ---- */

/* Exact powers of ten in float: 10^k for k <= 10 has a 5^k part below 2^24. */
static const float POW10F[11] = { 1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f };

int bbb_csv_parse_float(const char *s, size_t len, float *out) {
  size_t i = 0;
  int neg = 0, digits = 0, frac = 0, exp = 0, exp_digits = 0, exp_neg = 0;
  uint64_t m = 0;
  int m_exact = 1;
  if (i < len && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
    if (m < (1ull << 60)) m = m * 10 + (uint64_t)(s[i] - '0'); else m_exact = 0;
  }
  if (i < len && s[i] == '.') {
    for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++, frac++) {
      if (m < (1ull << 60)) m = m * 10 + (uint64_t)(s[i] - '0'); else m_exact = 0;
    }
  }
  if (digits == 0) return -1;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) exp_neg = s[i++] == '-';
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, exp_digits++)
      if (exp < 100000) exp = exp * 10 + (s[i] - '0');
    if (exp_digits == 0) return -1;
  }
  if (i != len) return -1;
  int e10 = (exp_neg ? -exp : exp) - frac;
  /* Clinger's fast path: an exact mantissa below 2^24 and an exact power of
  ** ten give the correctly rounded float in one IEEE operation. */
  if (m_exact && m < (1u << 24) && e10 >= -10 && e10 <= 10) {
    float v = (float)m;
    v = e10 < 0 ? v / POW10F[-e10] : v * POW10F[e10];
    *out = neg ? -v : v;
    return 0;
  }
  char buf[512];
  if (len >= sizeof buf) return -1;
  memcpy(buf, s, len);
  buf[len] = 0;
  float v = strtof(buf, NULL);
  if (!isfinite(v)) return BBB_CSV_OUT_OF_RANGE;   /* a number, but none a float holds */
  *out = v;
  return 0;
}

/* ---- small helpers ---- */

static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t k;
    uint32_t cp;
    if (c < 0x80) { i++; continue; }
    else if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; }
    else return 0;
    if (n - i <= k) return 0;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    i += k + 1;
  }
  return 1;
}

/* A field for a message: at most 40 bytes, anything but printable ASCII as \xNN. */
static const char *shown(const char *s, size_t n, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == 40) { memcpy(buf + o, "...", 3); o += 3; break; }
    if (c >= 0x20 && c < 0x7f && c != '\'') buf[o++] = (char)c;
    else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
  }
  buf[o] = 0;
  return buf;
}

/* A string set: open addressing over indices into a growing string list. */
typedef struct strset {
  int *slots;                 /* 0 empty, else index + 1 */
  size_t cap;
  const char **strs;
  size_t *lens;
  int n, strs_cap;
} strset;

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static void strset_free(strset *s) {
  free(s->slots);
  free(s->strs);
  free(s->lens);
  memset(s, 0, sizeof *s);
}

/* The 1-based index of s, or 0 when absent (and not inserted). */
static int strset_find(const strset *s, const char *str, size_t n, size_t *slot) {
  if (!s->cap) return 0;
  size_t i = hash_bytes(str, n) & (s->cap - 1);
  for (;; i = (i + 1) & (s->cap - 1)) {
    int k = s->slots[i];
    if (!k) { if (slot) *slot = i; return 0; }
    if (s->lens[k - 1] == n && memcmp(s->strs[k - 1], str, n) == 0) return k;
  }
}

/* Inserts str (copied into the arena); returns its index, or -1 when out of memory. */
static int strset_add(strset *s, bbb_arena *a, const char *str, size_t n) {
  if ((size_t)(s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    int *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->cap; i++) {
      int k = s->slots[i];
      if (!k) continue;
      size_t j = hash_bytes(s->strs[k - 1], s->lens[k - 1]) & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = k;
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  if (s->n == s->strs_cap) {
    int cap = s->strs_cap ? 2 * s->strs_cap : 16;
    const char **strs = realloc(s->strs, (size_t)cap * sizeof *strs);
    if (!strs) return -1;
    s->strs = strs;
    size_t *lens = realloc(s->lens, (size_t)cap * sizeof *lens);
    if (!lens) return -1;
    s->lens = lens;
    s->strs_cap = cap;
  }
  size_t slot = 0;
  strset_find(s, str, n, &slot);
  char *c = bbb_arena_strdup(a, str, n);
  if (!c) return -1;
  s->strs[s->n] = c;
  s->lens[s->n] = n;
  s->slots[slot] = ++s->n;
  return s->n;
}

/* Removes the string added last. Safe in linear probing: no string added
** after it can have probed past its slot. */
static void strset_pop(strset *s) {
  if (!s->n) return;
  size_t i = hash_bytes(s->strs[s->n - 1], s->lens[s->n - 1]) & (s->cap - 1);
  while (s->slots[i] != s->n) i = (i + 1) & (s->cap - 1);
  s->slots[i] = 0;
  s->n--;
}

/* ---- the parse ---- */

enum { KIND_UNDECIDED, KIND_NUMBER, KIND_CATEGORY };

typedef struct colstate {
  int slot;                   /* place in a stored row; -1 ignored */
  int kind, forced;
  int64_t added_in;           /* the row that added the last level */
  strset levels;
  int64_t numbers, texts;     /* a category column's values that parse as numbers, and not */
  int64_t text_row;           /* the first of the latter: its row and (shown) text */
  char text[64];
} colstate;

typedef struct ctx {
  const bbb_csv_options *o;
  bbb_arena *arena;
  int st;                     /* first failure */
  int started;                /* the first record is done */
  int64_t row;                /* data rows begun (the current one's number) */
  int field;                  /* fields of the current record so far */
  const char **rec;           /* the first record's fields, until it ends */
  size_t *rec_len;
  int rec_cap;
  strset names;               /* the column names */
  int ncol, width, target_slot;
  colstate *cols;
  int row_missing;
  float **blocks;
  size_t nblocks, blocks_cap;
  int64_t block_rows, n_rows, n_dropped;
  float *cur;                 /* the row being filled */
  double *y_exact;            /* a numeric target as parsed in double, per kept row */
  int64_t y_exact_cap;
} ctx;

static _Thread_local int field_too_long;

/* libcsv grows a field's buffer through this: refusing past the limit makes
** a huge field an error instead of gigabytes. */
static void *limited_realloc(void *p, size_t n) {
  if (n > BBB_CSV_MAX_FIELD + 64) { field_too_long = 1; return NULL; }
  return realloc(p, n);
}

static const char *col_name(const ctx *c, int j) {
  return j < c->names.n ? c->names.strs[j] : "?";
}

static int fail_at(ctx *c, int j, const char *what, const char *s, size_t n) {
  char b[256];
  c->st = bbb_error(BBB_EIO, "read_csv: row %lld, column %d ('%s'): %s '%s'", (long long)c->row,
                    j + 1, col_name(c, j), what, shown(s, n, b, sizeof b));
  return c->st;
}

static int new_row(ctx *c) {
  int64_t i = c->n_rows % c->block_rows;
  if (i == 0 && (size_t)(c->n_rows / c->block_rows) == c->nblocks) {
    if (c->nblocks == c->blocks_cap) {
      size_t cap = c->blocks_cap ? 2 * c->blocks_cap : 64;
      float **b = realloc(c->blocks, cap * sizeof *b);
      if (!b) return c->st = bbb_error(BBB_EMEM, "read_csv: out of memory");
      c->blocks = b;
      c->blocks_cap = cap;
    }
    void *m = mmap(NULL, BLOCK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return c->st = bbb_error(BBB_EMEM, "read_csv: out of memory after %lld rows",
                                                  (long long)c->n_rows);
    c->blocks[c->nblocks++] = m;
  }
  c->cur = c->blocks[c->n_rows / c->block_rows] + i * c->width;
  c->row_missing = 0;
  if (c->target_slot >= 0 && c->n_rows >= c->y_exact_cap) {
    int64_t cap = c->y_exact_cap ? 2 * c->y_exact_cap : 1024;
    double *y = realloc(c->y_exact, (size_t)cap * sizeof *y);
    if (!y) return c->st = bbb_error(BBB_EMEM, "read_csv: out of memory after %lld rows", (long long)c->n_rows);
    c->y_exact = y;
    c->y_exact_cap = cap;
  }
  return BBB_OK;
}

/* The target's cell in double as well: a float keeps 7 digits, and a
** target far from zero next to its spread (1e8 +- 3) needs more. */
static void keep_exact_target(ctx *c, const colstate *col, const char *s, size_t n, float parsed) {
  if (col->slot != c->target_slot) return;
  char buf[512];
  if (n >= sizeof buf) { c->y_exact[c->n_rows] = parsed; return; }
  memcpy(buf, s, n);
  buf[n] = 0;
  c->y_exact[c->n_rows] = strtod(buf, NULL);
}

static int is_na(const bbb_csv_options *o, const char *s, size_t n) {
  for (int k = 0; k < o->n_na; k++)
    if (strlen(o->na[k]) == n && memcmp(o->na[k], s, n) == 0) return 1;
  return 0;
}

/* Counts a category column's values by whether they parse as numbers,
** keeping the first that does not (see mostly_numbers). */
static void count_kind(const ctx *c, colstate *col, const char *s, size_t n) {
  float v;
  if (bbb_csv_parse_float(s, n, &v) != -1) {
    col->numbers++;
  } else if (col->texts++ == 0) {
    col->text_row = c->row;
    shown(s, n, col->text, sizeof col->text);
  }
}

/* An error for a column read as categories (not named so) whose values are
** mostly numbers: its text is a stray cell, wherever it stands. */
static int mostly_numbers(ctx *c, int j) {
  const colstate *col = &c->cols[j];
  if (col->kind != KIND_CATEGORY || col->forced || col->numbers <= col->texts) return BBB_OK;
  return c->st = bbb_error(BBB_EIO, "read_csv: column %d ('%s') holds numbers in %lld rows, but row %lld holds "
                           "'%s', which is not a number: fix it, or name the column categorical", j + 1,
                           col_name(c, j), (long long)col->numbers, (long long)col->text_row, col->text);
}

static void data_field(ctx *c, int j, const char *s, size_t n) {
  colstate *col = &c->cols[j];
  if (col->slot < 0) return;
  float *dst = &c->cur[col->slot];
  if (is_na(c->o, s, n)) {
    if (col->slot == c->target_slot) c->y_exact[c->n_rows] = NAN;
    if (c->o->keep_missing) { *dst = NAN; return; }
    if (!c->o->drop_missing) { fail_at(c, j, n ? "missing value" : "missing value (an empty field)", s, n); return; }
    c->row_missing = 1;
    *dst = NAN;
    return;
  }
  int parsed = col->forced ? -1 : bbb_csv_parse_float(s, n, dst);
  if (parsed == BBB_CSV_OUT_OF_RANGE) {
    fail_at(c, j, "a number beyond float32's range (about 3.4e38),", s, n);
    return;
  }
  if (col->kind == KIND_UNDECIDED) col->kind = parsed ? KIND_CATEGORY : KIND_NUMBER;
  if (col->kind == KIND_NUMBER) {
    if (parsed) fail_at(c, j, "bad number (the column holds numbers;"
                              " name it categorical to read categories)", s, n);
    else keep_exact_target(c, col, s, n, *dst);
    return;
  }
  if (!utf8_valid((const unsigned char *)s, n)) { fail_at(c, j, "invalid UTF-8 in", s, n); return; }
  if (memchr(s, 0, n)) { fail_at(c, j, "a NUL byte in", s, n); return; }
  if (!col->forced) count_kind(c, col, s, n);
  int k = strset_find(&col->levels, s, n, NULL);
  if (!k) {
    if (col->levels.n >= c->o->max_levels) {
      c->st = bbb_error(BBB_EIO, "read_csv: column %d ('%s') has more than %d distinct values at row %lld"
                        " (an identifier? ignore it, or raise max_levels)", j + 1, col_name(c, j),
                        c->o->max_levels, (long long)c->row);
      return;
    }
    k = strset_add(&col->levels, c->arena, s, n);
    if (k < 0) { c->st = bbb_error(BBB_EMEM, "read_csv: out of memory"); return; }
    col->added_in = c->row;
  }
  *dst = (float)k;
}

/* A row dropped for a missing value takes back the levels it added, so
** every level kept is seen in a kept row. */
static void drop_row(ctx *c) {
  c->n_dropped++;
  for (int j = 0; j < c->ncol; j++)
    if (c->cols[j].added_in == c->row && c->cols[j].levels.n) {
      strset_pop(&c->cols[j].levels);
      c->cols[j].added_in = 0;
    }
}

static int listed(const char *const *names, int n, const char *s) {
  for (int k = 0; k < n; k++)
    if (strcmp(names[k], s) == 0) return 1;
  return 0;
}

static int check_named(ctx *c, const char *name, const char *opt) {
  char b[256];
  if (strset_find(&c->names, name, strlen(name), NULL)) return BBB_OK;
  return c->st = bbb_error(BBB_EARG, "read_csv: %s column '%s' is not in the %s", opt,
                           shown(name, strlen(name), b, sizeof b), c->o->header ? "header" : "columns V1..");
}

static int check_text(ctx *c, const char *s, size_t n, const char *where, int j) {
  char b[256];
  if (!utf8_valid((const unsigned char *)s, n))
    return c->st = bbb_error(BBB_EIO, "read_csv: %s, column %d: invalid UTF-8 in '%s'", where, j + 1,
                             shown(s, n, b, sizeof b));
  if (memchr(s, 0, n))
    return c->st = bbb_error(BBB_EIO, "read_csv: %s, column %d: a NUL byte in '%s'", where, j + 1,
                             shown(s, n, b, sizeof b));
  return BBB_OK;
}

/* The first record is complete: name the columns and set them up. */
static int setup_columns(ctx *c) {
  const bbb_csv_options *o = c->o;
  c->ncol = c->field;
  for (int j = 0; j < c->ncol; j++) {
    char nm[32], b[256];
    const char *s = nm;
    size_t n;
    if (o->header) {
      s = c->rec[j];
      n = c->rec_len[j];
      if (n == 0) return c->st = bbb_error(BBB_EIO, "read_csv: header: column %d has no name", j + 1);
      if (check_text(c, s, n, "header", j)) return c->st;
      if (strset_find(&c->names, s, n, NULL))
        return c->st = bbb_error(BBB_EIO, "read_csv: header: column %d: the name '%s' is used twice", j + 1,
                                 shown(s, n, b, sizeof b));
    } else {
      n = (size_t)snprintf(nm, sizeof nm, "V%d", j + 1);
    }
    if (strset_add(&c->names, c->arena, s, n) < 0) return c->st = bbb_error(BBB_EMEM, "read_csv: out of memory");
  }
  c->cols = bbb_arena_alloc(c->arena, (size_t)c->ncol * sizeof *c->cols);
  if (!c->cols) return c->st = bbb_error(BBB_EMEM, "read_csv: out of memory");
  for (int k = 0; k < o->n_categorical; k++)
    if (check_named(c, o->categorical[k], "categorical")) return c->st;
  for (int k = 0; k < o->n_ignore; k++)
    if (check_named(c, o->ignore[k], "ignored")) return c->st;
  c->target_slot = -1;
  if (o->target) {
    if (check_named(c, o->target, "target")) return c->st;
    if (listed(o->ignore, o->n_ignore, o->target))
      return c->st = bbb_error(BBB_EARG, "read_csv: the target column '%s' is also ignored", o->target);
  }
  c->width = 0;
  for (int j = 0; j < c->ncol; j++) {
    colstate *col = &c->cols[j];
    const char *nm = c->names.strs[j];
    col->forced = listed(o->categorical, o->n_categorical, nm);
    col->slot = listed(o->ignore, o->n_ignore, nm) ? -1 : c->width++;
    if (o->target && strcmp(nm, o->target) == 0) c->target_slot = col->slot;
  }
  if (c->width == 0) return c->st = bbb_error(BBB_EARG, "read_csv: every column is ignored");
  c->block_rows = (int64_t)(BLOCK_BYTES / ((size_t)c->width * sizeof(float)));
  if (!o->header) {
    /* the first record is data too: replay it */
    c->row = 1;
    if (new_row(c)) return c->st;
    for (int j = 0; j < c->ncol && !c->st; j++) data_field(c, j, c->rec[j], c->rec_len[j]);
    if (!c->st) { if (c->row_missing) drop_row(c); else c->n_rows++; }
  }
  return c->st;
}

static void on_field(void *s, size_t n, void *data) {
  ctx *c = data;
  if (c->st) return;
  if (!s) { s = ""; n = 0; }
  if (c->started && c->field == 0) c->row++;
  if (n > BBB_CSV_MAX_FIELD) {
    c->st = bbb_error(BBB_EIO, "read_csv: row %lld, field %d is longer than %zu bytes",
                      (long long)c->row, c->field + 1, BBB_CSV_MAX_FIELD);
    return;
  }
  if (!c->started) {
    /* the header (or, without one, the first row): kept until the record ends */
    if (c->field >= MAX_COLUMNS) {
      c->st = bbb_error(BBB_EIO, "read_csv: more than %d columns", MAX_COLUMNS);
      return;
    }
    if (c->field == c->rec_cap) {
      int cap = c->rec_cap ? 2 * c->rec_cap : 16;
      const char **r = realloc(c->rec, (size_t)cap * sizeof *r);
      if (r) c->rec = r;
      size_t *l = r ? realloc(c->rec_len, (size_t)cap * sizeof *l) : NULL;
      if (l) c->rec_len = l;
      if (!r || !l) { c->st = bbb_error(BBB_EMEM, "read_csv: out of memory"); return; }
      c->rec_cap = cap;
    }
    c->rec[c->field] = bbb_arena_strdup(c->arena, s, n);
    c->rec_len[c->field] = n;
    if (!c->rec[c->field]) { c->st = bbb_error(BBB_EMEM, "read_csv: out of memory"); return; }
    c->field++;
    return;
  }
  if (c->field == 0 && new_row(c)) return;
  if (c->field < c->ncol) data_field(c, c->field, s, n);
  c->field++;
}

static void on_record(int term, void *data) {
  ctx *c = data;
  (void)term;
  if (c->st) return;
  if (!c->started) {
    c->started = 1;
    setup_columns(c);
    c->field = 0;
    return;
  }
  if (c->field != c->ncol) {
    c->st = bbb_error(BBB_EIO, "read_csv: row %lld has %d field%s, the %s %d", (long long)c->row,
                      c->field, c->field == 1 ? "" : "s", c->o->header ? "header" : "first row", c->ncol);
    return;
  }
  if (c->row_missing) drop_row(c);   /* its place is taken by the next row */
  else c->n_rows++;
  c->field = 0;
}

static int feed(ctx *c, struct csv_parser *p, const unsigned char *s, size_t n) {
  size_t used = csv_parse(p, s, n, on_field, on_record, c);
  if (c->st) return c->st;
  if (used != n) {
    int e = csv_error(p);
    long long r = c->started ? (long long)c->row + (c->field == 0) : 0;
    if (e == CSV_ENOMEM && field_too_long)
      return c->st = bbb_error(BBB_EIO, "read_csv: row %lld: a field longer than %zu bytes", r, BBB_CSV_MAX_FIELD);
    if (e == CSV_EPARSE)
      return c->st = bbb_error(BBB_EIO, "read_csv: row %lld: malformed quoting (a quote inside an unquoted field,"
                               " or text after a closing quote)", r);
    return c->st = bbb_error(BBB_EMEM, "read_csv: %s", csv_strerror(e));
  }
  return BBB_OK;
}

static int finish(ctx *c, struct csv_parser *p, bbb_csv_table *out) {
  if (csv_fini(p, on_field, on_record, c) != 0 && !c->st) {
    long long r = c->started ? (long long)c->row : 0;
    return c->st = bbb_error(BBB_EIO, "read_csv: row %lld: a quoted field is not closed at the end of the file", r);
  }
  if (c->st) return c->st;
  if (!c->started) return bbb_error(BBB_EIO, "read_csv: the file is empty (no header, no rows)");
  if (c->n_rows == 0 && c->n_dropped)
    return bbb_error(BBB_EIO, "read_csv: every row has a missing value (%lld dropped)", (long long)c->n_dropped);
  if (c->n_rows == 0) return bbb_error(BBB_EIO, "read_csv: no data rows after the header");
  /* the columns */
  int nx = c->width - (c->target_slot >= 0);
  out->n_rows = c->n_rows;
  out->n_dropped = c->n_dropped;
  out->n_cols = nx;
  out->cols = bbb_arena_alloc(c->arena, (size_t)(nx > 0 ? nx : 1) * sizeof *out->cols);
  if (!out->cols) return bbb_error(BBB_EMEM, "read_csv: out of memory");
  for (int j = 0; j < c->ncol; j++)
    if (c->cols[j].slot >= 0 && mostly_numbers(c, j)) return c->st;
  for (int j = 0; j < c->ncol; j++) {
    colstate *col = &c->cols[j];
    if (col->slot < 0) continue;
    bbb_csv_column *d = col->slot == c->target_slot ? &out->target
                      : &out->cols[col->slot - (c->target_slot >= 0 && col->slot > c->target_slot)];
    d->name = c->names.strs[j];
    d->categorical = col->kind == KIND_CATEGORY;
    d->n_levels = col->levels.n;
    if (d->n_levels) {
      const char **lv = bbb_arena_alloc(c->arena, (size_t)d->n_levels * sizeof *lv);
      if (!lv) return bbb_error(BBB_EMEM, "read_csv: out of memory");
      memcpy(lv, col->levels.strs, (size_t)d->n_levels * sizeof *lv);
      d->levels = lv;
    } else {
      d->levels = NULL;
    }
  }
  out->has_target = c->target_slot >= 0;
  if (out->has_target && !out->target.categorical) {   /* the parsed doubles go to the table */
    out->y_exact = c->y_exact;
    c->y_exact = NULL;
  }
  /* the tensors, block by block */
  int64_t shape[2] = { c->n_rows, nx };
  out->x = bbb_tensor_new(2, shape);
  if (!out->x) return bbb_error(BBB_EMEM, "read_csv: out of memory for a %lld x %d table", (long long)c->n_rows, nx);
  if (out->has_target && !(out->y = bbb_tensor_new(1, shape))) return bbb_error(BBB_EMEM, "read_csv: out of memory");
  float *x = bbb_data(out->x), *y = out->y ? bbb_data(out->y) : NULL;
  int t = c->target_slot, w = c->width;
  for (size_t b = 0; b < c->nblocks; b++) {
    int64_t r0 = (int64_t)b * c->block_rows;
    int64_t rows = c->n_rows - r0 < c->block_rows ? c->n_rows - r0 : c->block_rows;
    const float *src = c->blocks[b];
    if (t < 0) {
      memcpy(x + r0 * nx, src, (size_t)(rows * nx) * sizeof(float));
    } else {
      for (int64_t i = 0; i < rows; i++) {
        const float *r = src + i * w;
        float *d = x + (r0 + i) * nx;
        memcpy(d, r, (size_t)t * sizeof(float));
        memcpy(d + t, r + t + 1, (size_t)(w - t - 1) * sizeof(float));
        y[r0 + i] = r[t];
      }
    }
    munmap(c->blocks[b], BLOCK_BYTES);
    c->blocks[b] = NULL;
  }
  return BBB_OK;
}

static void ctx_free(ctx *c) {
  for (size_t b = 0; b < c->nblocks; b++)
    if (c->blocks[b]) munmap(c->blocks[b], BLOCK_BYTES);
  free(c->blocks);
  free(c->y_exact);
  strset_free(&c->names);
  free(c->rec);
  free(c->rec_len);
  if (c->cols)
    for (int j = 0; j < c->ncol; j++) strset_free(&c->cols[j].levels);
}

static int check_options(const bbb_csv_options *o) {
  if (o->delim == o->quote)
    return bbb_error(BBB_EARG, "read_csv: the delimiter and the quote are the same character");
  if (o->delim == '\n' || o->delim == '\r' || o->quote == '\n' || o->quote == '\r')
    return bbb_error(BBB_EARG, "read_csv: a line break cannot be the delimiter or the quote");
  if (o->max_levels < 1) return bbb_error(BBB_EARG, "read_csv: max_levels must be >= 1");
  return BBB_OK;
}

typedef int (*source_fn)(void *src, const unsigned char **s, size_t *n);   /* n == 0: end */

static int run(const bbb_csv_options *o, bbb_csv_table *out, source_fn next, void *src) {
  memset(out, 0, sizeof *out);
  int st = check_options(o);
  if (st) return st;
  bbb_arena *a = bbb_arena_new(0);
  if (!a) return bbb_error(BBB_EMEM, "read_csv: out of memory");
  out->arena = a;
  ctx c = { .o = o, .arena = a };
  struct csv_parser p;
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
    bbb_csv_free(out);
    return bbb_error(BBB_EMEM, "read_csv: cannot start libcsv");
  }
  csv_set_delim(&p, o->delim);
  csv_set_quote(&p, o->quote);
  csv_set_realloc_func(&p, limited_realloc);
  field_too_long = 0;
  int first = 1;
  for (;;) {
    const unsigned char *s;
    size_t n;
    if ((st = next(src, &s, &n))) break;
    if (n == 0) break;
    if (first && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) { s += 3; n -= 3; }   /* a UTF-8 BOM */
    first = 0;
    if ((st = feed(&c, &p, s, n))) break;
  }
  if (!st) st = finish(&c, &p, out);
  csv_free(&p);
  ctx_free(&c);
  if (st) bbb_csv_free(out);
  return st;
}

typedef struct { const unsigned char *p; size_t n; int done; } mem_src;

static int mem_next(void *v, const unsigned char **s, size_t *n) {
  mem_src *m = v;
  *s = m->p;
  *n = m->done ? 0 : m->n;
  m->done = 1;
  return BBB_OK;
}

int bbb_csv_parse(const unsigned char *buf, size_t len, const bbb_csv_options *o, bbb_csv_table *out) {
  mem_src m = { buf, len, len == 0 };
  return run(o, out, mem_next, &m);
}

typedef struct { FILE *fp; unsigned char *buf; const char *path; } file_src;

static int file_next(void *v, const unsigned char **s, size_t *n) {
  file_src *f = v;
  *s = f->buf;
  *n = fread(f->buf, 1, READ_BYTES, f->fp);
  if (*n == 0 && ferror(f->fp)) return bbb_error(BBB_EIO, "read_csv: cannot read '%s'", f->path);
  return BBB_OK;
}

int bbb_csv_read(const char *path, const bbb_csv_options *o, bbb_csv_table *out) {
  memset(out, 0, sizeof *out);
  int fd;
  uint64_t size;
  int ost = bbb_open_input(path, "read_csv", &fd, &size);   /* a FIFO is refused, not waited on */
  if (ost) return ost;
  FILE *fp = fdopen(fd, "rb");
  if (!fp) { close(fd); return bbb_error(BBB_EIO, "read_csv: cannot open '%s'", path); }
  file_src f = { fp, malloc(READ_BYTES), path };
  int st = f.buf ? run(o, out, file_next, &f) : bbb_error(BBB_EMEM, "read_csv: out of memory");
  free(f.buf);
  fclose(fp);
  if (st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", bbb_errmsg());
    st = bbb_error(st, "%s (in '%s')", msg, path);
  }
  return st;
}

void bbb_csv_free(bbb_csv_table *t) {
  if (!t) return;
  bbb_tensor_release(t->x);
  bbb_tensor_release(t->y);
  free(t->y_exact);
  bbb_arena_free(t->arena);
  memset(t, 0, sizeof *t);
}
