/*
** rdata.c: R serialization (version 2, XDR) for a data frame of factors.
**
** The stream is a tree of items, each opening with a 32-bit big-endian
** flags word: the type in the low byte, then bits for "is an object",
** "has attributes" and "has a tag". Only the item types a data frame of
** factors needs are read (pairlists, symbols and references to them,
** strings, integer/logical vectors, lists); anything else is an error that
** names the type found and the byte offset. Lengths are checked against the
** bytes left before anything is allocated, nesting is limited, and every
** allocation is recorded in one arena, so shared (referenced) symbols and
** failures half way need no bookkeeping.
*/
#define _POSIX_C_SOURCE 200809L
#include <lzma.h>
#include <limits.h>
#include <math.h>
#include <zlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/arena.h"
#include "engine/tensor.h"
#include "io/input.h"
#include "io/rdata.h"

#define RD_MAX_DEPTH 64
#define RD_MAX_IMAGE ((size_t)1 << 26)     /* decompressed bytes */
#define RD_MAX_ARENA ((size_t)1 << 28)     /* bytes of parsed items: the arena's cap */
#define RD_MAX_FILE ((size_t)1 << 27)      /* compressed bytes */
#define RD_NA_INT INT32_MIN

enum {
  RD_NILSXP = 0, RD_SYMSXP = 1, RD_LISTSXP = 2, RD_CHARSXP = 9, RD_LGLSXP = 10,
  RD_INTSXP = 13, RD_REALSXP = 14, RD_STRSXP = 16, RD_VECSXP = 19, RD_ALTREP = 238,
  RD_REFSXP = 255, RD_NILVALUE = 254
};

#define RD_IS_OBJECT (1 << 8)
#define RD_HAS_ATTR (1 << 9)
#define RD_HAS_TAG (1 << 10)

/* ---- the item tree ---- */

typedef struct rd_node {
  int type;                   /* one of the RD_*SXP above */
  int64_t len;                /* vectors */
  int32_t *ints;              /* INTSXP, LGLSXP */
  double *reals;              /* REALSXP */
  char *str;                  /* CHARSXP (NULL: NA), SYMSXP name */
  struct rd_node **items;     /* STRSXP (CHARSXP nodes), VECSXP */
  struct rd_node *attr;       /* a pairlist or NULL */
  struct rd_node *tag, *car, *cdr;   /* LISTSXP */
} rd_node;

typedef struct rd_parser {
  const unsigned char *p;
  size_t n, pos;
  bbb_arena *arena;
  rd_node **refs;
  size_t nrefs, caprefs;
} rd_parser;

static const char *type_name(int t) {
  switch (t) {
    case 0: return "NULL"; case 1: return "symbol"; case 2: return "pairlist";
    case 3: return "closure"; case 4: return "environment"; case 5: return "promise";
    case 6: return "language object"; case 7: return "special function";
    case 8: return "builtin function"; case 9: return "string (CHARSXP)";
    case 10: return "logical vector"; case 13: return "integer vector";
    case 14: return "double vector"; case 15: return "complex vector";
    case 16: return "character vector"; case 17: return "dot-dot-dot";
    case 19: return "list"; case 20: return "expression vector"; case 21: return "bytecode";
    case 22: return "external pointer"; case 23: return "weak reference";
    case 24: return "raw vector"; case 25: return "S4 object";
    case 238: return "ALTREP object"; case 239: return "attributed pairlist";
    case 240: return "attributed language object"; case 241: return "base environment";
    case 242: return "empty environment"; case 247: return "persistent reference";
    case 248: return "package environment"; case 249: return "namespace";
    case 250: return "base namespace"; case 251: return "missing argument";
    case 252: return "unbound value"; case 253: return "global environment";
    case 254: return "NULL"; case 255: return "reference";
    default: return "unknown type";
  }
}

static int unsupported(rd_parser *ps, int type, size_t at) {
  return bbb_error(BBB_EIO, "rdata: unsupported R object: %s (type %d) at byte %zu",
                   type_name(type), type, at);
}

static int read_int(rd_parser *ps, int32_t *v) {
  if (ps->n - ps->pos < 4)
    return bbb_error(BBB_EIO, "rdata: truncated: the data ends at byte %zu inside an item", ps->n);
  const unsigned char *b = ps->p + ps->pos;
  *v = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
  ps->pos += 4;
  return BBB_OK;
}

/* A vector length: one int, or -1 and two ints for a long vector. Each
** element needs at least min_bytes more bytes, so a length larger than what
** is left is an error before anything is allocated. */
static int read_length(rd_parser *ps, size_t min_bytes, int64_t *len) {
  int32_t v = 0;
  size_t at = ps->pos;
  int st = read_int(ps, &v);
  if (st) return st;
  int64_t l = v;
  if (v == -1) {
    int32_t hi = 0, lo = 0;
    if ((st = read_int(ps, &hi)) || (st = read_int(ps, &lo))) return st;
    /* a long vector: the length as two 32-bit halves, built unsigned (a
    ** signed shift of a large high half would overflow) */
    uint64_t u = (uint64_t)(uint32_t)hi << 32 | (uint32_t)lo;
    if (u > (uint64_t)INT64_MAX)
      return bbb_error(BBB_EIO, "rdata: vector length %llu at byte %zu is not a valid length",
                       (unsigned long long)u, at);
    l = (int64_t)u;
  }
  if (l < 0 || (uint64_t)l > (ps->n - ps->pos) / min_bytes)
    return bbb_error(BBB_EIO, "rdata: vector length %lld at byte %zu exceeds the %zu bytes left",
                     (long long)l, at, ps->n - ps->pos);
  *len = l;
  return BBB_OK;
}

static rd_node *new_node(rd_parser *ps, int type) {
  rd_node *nd = bbb_arena_alloc(ps->arena, sizeof *nd);
  if (!nd) { bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)"); return NULL; }
  nd->type = type;
  return nd;
}

static int read_item(rd_parser *ps, int depth, rd_node **out);
static int read_altrep(rd_parser *ps, int depth, size_t at, rd_node **out);

static int read_charsxp_body(rd_parser *ps, rd_node **out) {
  int64_t len;
  int32_t v = 0;
  size_t at = ps->pos;
  int st = read_int(ps, &v);
  if (st) return st;
  rd_node *nd = new_node(ps, RD_CHARSXP);
  if (!nd) return BBB_EMEM;
  *out = nd;
  if (v == -1) return BBB_OK;               /* NA_STRING */
  len = v;
  if (len < 0 || (size_t)len > ps->n - ps->pos)
    return bbb_error(BBB_EIO, "rdata: string length %lld at byte %zu exceeds the %zu bytes left",
                     (long long)len, at, ps->n - ps->pos);
  nd->str = bbb_arena_alloc(ps->arena, (size_t)len + 1);
  if (!nd->str) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  memcpy(nd->str, ps->p + ps->pos, (size_t)len);
  ps->pos += (size_t)len;
  return BBB_OK;
}

static int read_charsxp(rd_parser *ps, rd_node **out) {
  int32_t flags = 0;
  size_t at = ps->pos;
  int st = read_int(ps, &flags);
  if (st) return st;
  if ((flags & 0xff) != RD_CHARSXP)
    return bbb_error(BBB_EIO, "rdata: expected a string (CHARSXP) at byte %zu, found %s (type %d)",
                     at, type_name(flags & 0xff), flags & 0xff);
  return read_charsxp_body(ps, out);
}

static int add_ref(rd_parser *ps, rd_node *nd) {
  if (ps->nrefs == ps->caprefs) {
    size_t cap = ps->caprefs ? 2 * ps->caprefs : 32;
    rd_node **r = realloc(ps->refs, cap * sizeof *r);
    if (!r) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    ps->refs = r;
    ps->caprefs = cap;
  }
  ps->refs[ps->nrefs++] = nd;
  return BBB_OK;
}

/* A pairlist, read as a loop over its cells (a long list must not recurse). */
static int read_pairlist(rd_parser *ps, int32_t flags, int depth, rd_node **out) {
  rd_node **link = out;
  for (;;) {
    rd_node *cell = new_node(ps, RD_LISTSXP);
    if (!cell) return BBB_EMEM;
    *link = cell;
    int st;
    if ((flags & RD_HAS_ATTR) && (st = read_item(ps, depth + 1, &cell->attr))) return st;
    if ((flags & RD_HAS_TAG) && (st = read_item(ps, depth + 1, &cell->tag))) return st;
    if ((st = read_item(ps, depth + 1, &cell->car))) return st;
    size_t at = ps->pos;
    if ((st = read_int(ps, &flags))) return st;
    int type = flags & 0xff;
    if (type == RD_NILVALUE) return BBB_OK;
    if (type != RD_LISTSXP)
      return bbb_error(BBB_EIO, "rdata: a pairlist continues with %s (type %d) at byte %zu",
                       type_name(type), type, at);
    link = &cell->cdr;
  }
}

static int read_vector(rd_parser *ps, int type, rd_node *nd, int depth) {
  int st;
  if (type == RD_INTSXP || type == RD_LGLSXP) {
    if ((st = read_length(ps, 4, &nd->len))) return st;
    nd->ints = bbb_arena_alloc(ps->arena, (size_t)nd->len * sizeof(int32_t));
    if (!nd->ints) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    for (int64_t i = 0; i < nd->len; i++)
      if ((st = read_int(ps, &nd->ints[i]))) return st;
    return BBB_OK;
  }
  if (type == RD_REALSXP) {
    if ((st = read_length(ps, 8, &nd->len))) return st;
    nd->reals = bbb_arena_alloc(ps->arena, (size_t)nd->len * sizeof(double));
    if (!nd->reals) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    for (int64_t i = 0; i < nd->len; i++) {
      const unsigned char *b = ps->p + ps->pos;   /* read_length checked 8 bytes per element */
      uint64_t u = 0;
      for (int k = 0; k < 8; k++) u = u << 8 | b[k];
      memcpy(&nd->reals[i], &u, 8);
      ps->pos += 8;
    }
    return BBB_OK;
  }
  /* STRSXP (each element at least flags + length) or VECSXP (at least flags) */
  if ((st = read_length(ps, type == RD_STRSXP ? 8 : 4, &nd->len))) return st;
  nd->items = bbb_arena_alloc(ps->arena, (size_t)nd->len * sizeof(rd_node *));
  if (!nd->items) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  for (int64_t i = 0; i < nd->len; i++) {
    st = type == RD_STRSXP ? read_charsxp(ps, &nd->items[i]) : read_item(ps, depth + 1, &nd->items[i]);
    if (st) return st;
  }
  return BBB_OK;
}

/* An ALTREP object (serialization version 3): info (a pairlist naming its
** class), state, attributes. The compact sequences R writes for 1:n are
** expanded; wrappers give the vector they wrap; other classes are errors. */
static int read_altrep(rd_parser *ps, int depth, size_t at, rd_node **out) {
  rd_node *info, *state, *attr;
  int st;
  if ((st = read_item(ps, depth + 1, &info)) || (st = read_item(ps, depth + 1, &state)) ||
      (st = read_item(ps, depth + 1, &attr)))
    return st;
  const char *cls = info && info->type == RD_LISTSXP && info->car && info->car->type == RD_SYMSXP
                    ? info->car->str : NULL;
  if (!cls) return bbb_error(BBB_EIO, "rdata: an ALTREP object at byte %zu has no class", at);
  rd_node *nd = NULL;
  if ((strcmp(cls, "compact_intseq") == 0 || strcmp(cls, "compact_realseq") == 0) &&
      state && state->type == RD_REALSXP && state->len == 3) {
    double n = state->reals[0], start = state->reals[1], step = state->reals[2];
    int is_int = cls[8] == 'i';
    if (!(n >= 0 && n <= (double)(1 << 26)) || !(fabs(start) < 2e9) || !(step == 1 || step == -1))
      return bbb_error(BBB_EIO, "rdata: a %s at byte %zu has length %g, start %g, step %g", cls, at, n, start, step);
    if (!(nd = new_node(ps, is_int ? RD_INTSXP : RD_REALSXP))) return BBB_EMEM;
    nd->len = (int64_t)n;
    void *d = bbb_arena_alloc(ps->arena, (size_t)nd->len * (is_int ? 4 : 8));
    if (!d) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    for (int64_t i = 0; i < nd->len; i++) {
      double v = start + step * (double)i;
      if (is_int) ((int32_t *)d)[i] = (int32_t)v; else ((double *)d)[i] = v;
    }
    if (is_int) nd->ints = d; else nd->reals = d;
  } else if (strncmp(cls, "wrap_", 5) == 0 && state && state->type == RD_VECSXP && state->len >= 1 &&
             state->items[0]) {
    rd_node *w = state->items[0];
    if (!(nd = new_node(ps, w->type))) return BBB_EMEM;
    *nd = *w;   /* a copy: the attributes below are the wrapper's, not the vector's */
  } else {
    return bbb_error(BBB_EIO, "rdata: unsupported ALTREP class '%s' at byte %zu", cls, at);
  }
  if (attr && attr->type == RD_LISTSXP) nd->attr = attr;
  *out = nd;
  return BBB_OK;
}

static int read_item(rd_parser *ps, int depth, rd_node **out) {
  int32_t flags = 0;
  size_t at = ps->pos;
  *out = NULL;
  if (depth > RD_MAX_DEPTH)
    return bbb_error(BBB_EIO, "rdata: items nested deeper than %d at byte %zu", RD_MAX_DEPTH, at);
  int st = read_int(ps, &flags);
  if (st) return st;
  int type = flags & 0xff;
  switch (type) {
    case RD_NILVALUE:
      *out = new_node(ps, RD_NILSXP);
      return *out ? BBB_OK : BBB_EMEM;
    case RD_REFSXP: {
      int64_t idx = (uint32_t)flags >> 8;
      if (idx == 0) {
        int32_t v = 0;
        if ((st = read_int(ps, &v))) return st;
        idx = v;
      }
      if (idx < 1 || (uint64_t)idx > ps->nrefs)
        return bbb_error(BBB_EIO, "rdata: reference %lld at byte %zu, but only %zu items can be referred to",
                         (long long)idx, at, ps->nrefs);
      *out = ps->refs[idx - 1];
      return BBB_OK;
    }
    case RD_SYMSXP: {
      rd_node *nd = new_node(ps, RD_SYMSXP), *name;
      if (!nd) return BBB_EMEM;
      if ((st = read_charsxp(ps, &name))) return st;
      if (!name->str) return bbb_error(BBB_EIO, "rdata: a symbol at byte %zu has an NA name", at);
      nd->str = name->str;
      *out = nd;
      return add_ref(ps, nd);
    }
    case RD_LISTSXP:
      return read_pairlist(ps, flags, depth, out);
    case RD_CHARSXP:
      return read_charsxp_body(ps, out);
    case RD_ALTREP:
      return read_altrep(ps, depth, at, out);
    case RD_INTSXP: case RD_LGLSXP: case RD_REALSXP: case RD_STRSXP: case RD_VECSXP: {
      rd_node *nd = new_node(ps, type);
      if (!nd) return BBB_EMEM;
      *out = nd;
      if ((st = read_vector(ps, type, nd, depth))) return st;
      if (flags & RD_HAS_ATTR) {
        size_t at_attr = ps->pos;
        if ((st = read_item(ps, depth + 1, &nd->attr))) return st;
        if (nd->attr->type != RD_LISTSXP && nd->attr->type != RD_NILSXP)
          return bbb_error(BBB_EIO, "rdata: attributes at byte %zu are not a pairlist (found: %s)",
                           at_attr, type_name(nd->attr->type));
      }
      return BBB_OK;
    }
    default:
      return unsupported(ps, type, at);
  }
}

/* ---- from the tree to a frame ---- */

static rd_node *get_attr(const rd_node *nd, const char *name) {
  for (const rd_node *c = nd->attr; c && c->type == RD_LISTSXP; c = c->cdr)
    if (c->tag && c->tag->type == RD_SYMSXP && strcmp(c->tag->str, name) == 0) return c->car;
  return NULL;
}

static int has_class(const rd_node *nd, const char *cls) {
  const rd_node *c = get_attr(nd, "class");
  if (!c || c->type != RD_STRSXP) return 0;
  for (int64_t i = 0; i < c->len; i++)
    if (c->items[i]->str && strcmp(c->items[i]->str, cls) == 0) return 1;
  return 0;
}

static const char *what(const rd_node *nd) {
  return nd ? type_name(nd->type) : "nothing";
}

static int64_t frame_rows(const rd_node *df) {
  const rd_node *rn = get_attr(df, "row.names");
  if (!rn) return -1;
  if (rn->type == RD_INTSXP) {
    /* compact form c(NA, -n) (or c(NA, n)) */
    if (rn->len == 2 && rn->ints[0] == RD_NA_INT && rn->ints[1] != RD_NA_INT)
      return rn->ints[1] < 0 ? -(int64_t)rn->ints[1] : rn->ints[1];
    return rn->len;
  }
  if (rn->type == RD_STRSXP) return rn->len;
  return -1;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A character column as a factor: its distinct strings sorted (as R's
** factor() would, in the C locale) become the levels. */
static int strings_to_factor(rd_parser *ps, rd_node *col, bbb_rdata_factor *c, int j) {
  const char **sorted = bbb_arena_alloc(ps->arena, (size_t)(col->len ? col->len : 1) * sizeof(char *));
  c->codes = bbb_arena_alloc(ps->arena, (size_t)(col->len ? col->len : 1) * sizeof(int32_t));
  if (!sorted || !c->codes) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  int64_t n = 0;
  for (int64_t i = 0; i < col->len; i++)
    if (col->items[i]->str) sorted[n++] = col->items[i]->str;
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
  int64_t u = 0;
  for (int64_t i = 0; i < n; i++)
    if (u == 0 || strcmp(sorted[u - 1], sorted[i]) != 0) sorted[u++] = sorted[i];
  if (u > INT_MAX) return bbb_error(BBB_EIO, "rdata: column %d has too many distinct strings", j + 1);
  c->n_levels = (int)u;
  c->levels = sorted;
  for (int64_t i = 0; i < col->len; i++) {
    const char *sv = col->items[i]->str;
    if (!sv) { c->codes[i] = 0; continue; }
    const char **hit = bsearch(&sv, sorted, (size_t)u, sizeof *sorted, cmp_str);
    c->codes[i] = (int32_t)(hit - sorted) + 1;
  }
  return BBB_OK;
}

static int to_column(rd_parser *ps, rd_node *col, bbb_rdata_factor *c, int j, int64_t n_rows) {
  rd_node *lev = get_attr(col, "levels");
  if (col->type != RD_INTSXP && col->type != RD_LGLSXP && col->type != RD_REALSXP && col->type != RD_STRSXP)
    return bbb_error(BBB_EIO, "rdata: column %d ('%s') is a %s, not numbers, a factor or strings",
                     j + 1, c->name, what(col));
  if (col->len != n_rows)
    return bbb_error(BBB_EIO, "rdata: column %d ('%s') has %lld rows, the frame %lld", j + 1,
                     c->name, (long long)col->len, (long long)n_rows);
  if (col->type == RD_STRSXP) return strings_to_factor(ps, col, c, j);
  if (col->type == RD_INTSXP && has_class(col, "factor")) {
    if (!lev || lev->type != RD_STRSXP)
      return bbb_error(BBB_EIO, "rdata: column %d ('%s') is a factor without levels", j + 1, c->name);
    if (lev->len > INT_MAX) return bbb_error(BBB_EIO, "rdata: column %d has too many levels", j + 1);
    c->n_levels = (int)lev->len;
    c->levels = bbb_arena_alloc(ps->arena, (size_t)(lev->len ? lev->len : 1) * sizeof(char *));
    if (!c->levels) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    for (int64_t k = 0; k < lev->len; k++) {
      if (!lev->items[k]->str)
        return bbb_error(BBB_EIO, "rdata: column %d ('%s') has an NA level", j + 1, c->name);
      c->levels[k] = lev->items[k]->str;
    }
    c->codes = col->ints;
    for (int64_t i = 0; i < n_rows; i++) {
      int32_t v = c->codes[i];
      if (v == RD_NA_INT) { c->codes[i] = 0; continue; }
      if (v < 1 || v > c->n_levels)
        return bbb_error(BBB_EIO, "rdata: column %d ('%s') row %lld has code %d outside 1..%d",
                         j + 1, c->name, (long long)i + 1, (int)v, c->n_levels);
    }
    return BBB_OK;
  }
  /* numbers: doubles as they are, integers and logicals converted; NA is NaN */
  c->numeric = 1;
  if (col->type == RD_REALSXP) { c->values = col->reals; return BBB_OK; }
  c->values = bbb_arena_alloc(ps->arena, (size_t)(n_rows ? n_rows : 1) * sizeof(double));
  if (!c->values) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  for (int64_t i = 0; i < n_rows; i++)
    c->values[i] = col->ints[i] == RD_NA_INT ? NAN : (double)col->ints[i];
  return BBB_OK;
}

/* A data frame (a tibble is one too) of numbers, factors and strings. */
static int frame_from(rd_parser *ps, rd_node *df, bbb_rdata_frame *f) {
  if (!df || df->type != RD_VECSXP || !has_class(df, "data.frame"))
    return bbb_error(BBB_EIO, "rdata: object '%s' is not a data frame (found: %s%s)",
                     f->object_name ? f->object_name : "?", what(df),
                     df && df->type == RD_VECSXP ? " without class data.frame" : "");
  if (df->len > INT_MAX) return bbb_error(BBB_EIO, "rdata: too many columns (%lld)", (long long)df->len);
  rd_node *names = get_attr(df, "names");
  if (!names || names->type != RD_STRSXP || names->len != df->len)
    return bbb_error(BBB_EIO, "rdata: the data frame's names (found: %s of length %lld) do not fit its %lld columns",
                     what(names), names ? (long long)names->len : 0LL, (long long)df->len);
  int64_t n_rows = frame_rows(df);
  if (n_rows < 0) return bbb_error(BBB_EIO, "rdata: the data frame has no usable row.names");
  f->n_rows = n_rows;
  f->n_cols = (int)df->len;
  f->cols = bbb_arena_alloc(ps->arena, (size_t)(df->len ? df->len : 1) * sizeof *f->cols);
  if (!f->cols) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  for (int j = 0; j < f->n_cols; j++) {
    bbb_rdata_factor *c = &f->cols[j];
    c->name = names->items[j]->str ? names->items[j]->str : "NA";
    if (!df->items[j]) return bbb_error(BBB_EIO, "rdata: column %d ('%s') is missing", j + 1, c->name);
    int st = to_column(ps, df->items[j], c, j, n_rows);
    if (st) return st;
  }
  return BBB_OK;
}

/* An .rda image holds a pairlist of named objects: the first is read. */
static int to_frame(rd_parser *ps, rd_node *top, bbb_rdata_frame *f) {
  if (!top || top->type != RD_LISTSXP || !top->car)
    return bbb_error(BBB_EIO, "rdata: the file does not hold a pairlist of named objects (found: %s)", what(top));
  if (top->tag && top->tag->type == RD_SYMSXP) f->object_name = top->tag->str;
  return frame_from(ps, top->car, f);
}

/* ---- xz ---- */

static int xz_decode(const unsigned char *in, size_t n, unsigned char **out, size_t *out_len) {
  lzma_stream s = LZMA_STREAM_INIT;
  *out = NULL;
  if (lzma_stream_decoder(&s, (uint64_t)1 << 28, LZMA_CONCATENATED) != LZMA_OK)
    return bbb_error(BBB_EMEM, "rdata: cannot start the xz decoder");
  size_t cap = n < RD_MAX_IMAGE / 4 ? n * 4 + 4096 : RD_MAX_IMAGE, used = 0;
  unsigned char *buf = NULL;
  int st = BBB_OK;
  s.next_in = in;
  s.avail_in = n;
  for (;;) {
    if (used == cap || !buf) {
      if (buf) cap *= 2;
      if (cap > RD_MAX_IMAGE) cap = RD_MAX_IMAGE;
      if (buf && used == cap) {
        st = bbb_error(BBB_EIO, "rdata: the xz stream decompresses to more than %zu bytes", RD_MAX_IMAGE);
        break;
      }
      unsigned char *b = realloc(buf, cap);
      if (!b) { st = bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)"); break; }
      buf = b;
    }
    s.next_out = buf + used;
    s.avail_out = cap - used;
    lzma_ret r = lzma_code(&s, LZMA_FINISH);
    used = cap - s.avail_out;
    if (r == LZMA_STREAM_END) break;
    if (r == LZMA_OK) continue;
    if (r == LZMA_BUF_ERROR && s.avail_out > 0)
      st = bbb_error(BBB_EIO, "rdata: truncated xz stream (%zu compressed bytes)", n);
    else if (r == LZMA_BUF_ERROR)
      continue;
    else if (r == LZMA_MEM_ERROR || r == LZMA_MEMLIMIT_ERROR)
      st = bbb_error(BBB_EMEM, "rdata: the xz stream needs too much memory");
    else
      st = bbb_error(BBB_EIO, "rdata: corrupted xz stream (liblzma error %d)", (int)r);
    break;
  }
  lzma_end(&s);
  if (st) { free(buf); return st; }
  *out = buf;
  *out_len = used;
  return BBB_OK;
}

/* ---- entry points ---- */

/* The serialization header ("X\n", version, writer, reader and, from
** version 3, the native encoding), then the items. bare: the stream holds
** one object (a lazy-load chunk or an .rds file), not a pairlist of named
** objects. */
static int parse_stream(const unsigned char *p, size_t n, size_t pos, int bare, rd_node **top, rd_parser *ps) {
  ps->p = p;
  ps->n = n;
  ps->pos = pos;
  if (n - pos < 2 || p[pos] != 'X' || p[pos + 1] != '\n') {
    if (n - pos >= 2 && (p[pos] == 'A' || p[pos] == 'B') && p[pos + 1] == '\n')
      return bbb_error(BBB_EIO, "rdata: only the XDR (binary big-endian) serialization is supported, found %s",
                       p[pos] == 'A' ? "ASCII" : "native binary");
    return bbb_error(BBB_EIO, "rdata: not an R serialization (no 'X\\n' at byte %zu)", pos);
  }
  ps->pos += 2;
  int32_t version = 0, writer = 0, reader = 0;
  int st = read_int(ps, &version);
  if (!st) st = read_int(ps, &writer);
  if (!st) st = read_int(ps, &reader);
  if (!st && version != 2 && version != 3)
    st = bbb_error(BBB_EIO, "rdata: serialization version %d, only versions 2 and 3 are supported", (int)version);
  if (!st && version == 3) {
    int32_t nelen = 0;
    size_t at = ps->pos;
    if (!(st = read_int(ps, &nelen)) && (nelen < 0 || nelen > 255 || (size_t)nelen > ps->n - ps->pos))
      st = bbb_error(BBB_EIO, "rdata: native encoding of length %d at byte %zu", (int)nelen, at);
    if (!st) ps->pos += (size_t)nelen;
  }
  (void)bare;
  if (!st) st = read_item(ps, 0, top);
  return st;
}

static int parse_image(const unsigned char *p, size_t n, bbb_rdata_frame *f) {
  if (n < 5 || memcmp(p, "RDX", 3) != 0 || (p[3] != '2' && p[3] != '3') || p[4] != '\n') {
    if (n >= 5 && (memcmp(p, "RDA", 3) == 0 || memcmp(p, "RDB", 3) == 0 || memcmp(p, "RDX", 3) == 0))
      return bbb_error(BBB_EIO, "rdata: only XDR format versions 2 and 3 (RDX2, RDX3) are supported, found '%.4s'",
                       (const char *)p);
    return bbb_error(BBB_EIO, "rdata: not an R data file (no RDX2 or RDX3 header)");
  }
  rd_parser ps = { .arena = f->arena };
  rd_node *top = NULL;
  int st = parse_stream(p, n, 5, 0, &top, &ps);
  if (!st) st = to_frame(&ps, top, f);
  free(ps.refs);
  return st;
}

static int inflate_all(const unsigned char *in, size_t n, size_t max, unsigned char **out, size_t *out_len,
                       const char *what);

int bbb_rdata_parse_frame(const unsigned char *buf, size_t len, bbb_rdata_frame *out) {
  static const unsigned char xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };
  memset(out, 0, sizeof *out);
  bbb_arena *a = bbb_arena_new(RD_MAX_ARENA);
  if (!a) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  out->arena = a;
  int st;
  if (len >= 6 && memcmp(buf, xz_magic, 6) == 0) {
    unsigned char *img;
    size_t n = 0;
    st = xz_decode(buf, len, &img, &n);
    if (!st) {
      st = parse_image(img, n, out);
      free(img);
    }
  } else if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {   /* gzip: R's save() by default */
    unsigned char *img;
    size_t n = 0;
    st = inflate_all(buf, len, RD_MAX_IMAGE, &img, &n, "the gzip stream");
    if (!st) {
      st = parse_image(img, n, out);
      free(img);
    }
  } else if (len >= 3 && buf[0] == 'B' && buf[1] == 'Z' && buf[2] == 'h') {
    st = bbb_error(BBB_EIO, "rdata: bzip2-compressed R data is not supported (only gzip and xz)");
  } else {
    st = parse_image(buf, len, out);
  }
  if (st) bbb_rdata_frame_free(out);
  return st;
}

/* A whole file into memory (at most RD_MAX_FILE bytes), opened through
** bbb_open_input (a regular file, checked before it is opened). */
static int read_whole(const char *path, unsigned char **out, size_t *len) {
  *out = NULL;
  int fd;
  uint64_t fsize;
  int ost = bbb_open_input(path, "rdata", &fd, &fsize);
  if (ost) return ost;
  FILE *fp = fdopen(fd, "rb");
  if (!fp) { close(fd); return bbb_error(BBB_EIO, "rdata: cannot open '%s'", path); }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  int st = buf ? BBB_OK : bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  while (!st) {
    if (n == cap) {
      if (cap >= RD_MAX_FILE) { st = bbb_error(BBB_EIO, "rdata: '%s' is larger than %zu bytes", path, RD_MAX_FILE); break; }
      unsigned char *b = realloc(buf, cap * 2);
      if (!b) { st = bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)"); break; }
      buf = b;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, fp);
    n += r;
    if (r == 0) {
      if (ferror(fp)) st = bbb_error(BBB_EIO, "rdata: cannot read '%s'", path);
      break;
    }
  }
  fclose(fp);
  if (st) { free(buf); return st; }
  *out = buf;
  *len = n;
  return BBB_OK;
}

static int name_file(int st, const char *path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s", bbb_errmsg());
  return bbb_error(st, "%s (in '%s')", msg, path);
}

int bbb_rdata_load_frame(const char *path, bbb_rdata_frame *out) {
  memset(out, 0, sizeof *out);
  unsigned char *buf;
  size_t n = 0;
  int st = read_whole(path, &buf, &n);
  if (st) return st;
  st = bbb_rdata_parse_frame(buf, n, out);
  if (st) st = name_file(st, path);
  free(buf);
  return st;
}

/* ---- lazy-load databases (an installed package's data/Rdata.rdx + .rdb) ---- */

/* zlib or gzip (windowBits 15 + 32 detects either) into at most max bytes. */
static int inflate_all(const unsigned char *in, size_t n, size_t max, unsigned char **out, size_t *out_len,
                       const char *what) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 32) != Z_OK) return bbb_error(BBB_EMEM, "rdata: cannot start zlib");
  size_t cap = 4096, used = 0;
  unsigned char *buf = NULL;
  int st = BBB_OK;
  z.next_in = (unsigned char *)in;
  z.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
  for (;;) {
    if (!buf || used == cap) {
      if (buf) {
        if (cap >= max) { st = bbb_error(BBB_EIO, "rdata: %s inflates to more than %zu bytes", what, max); break; }
        cap = cap * 2 > max ? max : cap * 2;
      }
      unsigned char *b = realloc(buf, cap);
      if (!b) { st = bbb_error(BBB_EMEM, "rdata: out of memory"); break; }
      buf = b;
    }
    z.next_out = buf + used;
    z.avail_out = (uInt)(cap - used);
    int r = inflate(&z, Z_NO_FLUSH);
    used = cap - z.avail_out;
    if (r == Z_STREAM_END) break;
    if (r == Z_OK) continue;
    if (r == Z_BUF_ERROR && z.avail_out == 0) continue;
    st = bbb_error(BBB_EIO, "rdata: %s: %s zlib stream", what, r == Z_BUF_ERROR ? "truncated" : "corrupted");
    break;
  }
  inflateEnd(&z);
  if (st) { free(buf); return st; }
  *out = buf;
  *out_len = used;
  return BBB_OK;
}

/* R's raw LZMA2 chunks (type 'Z' of R_decompress3): no container, the
** filter chain R uses (LZMA2, preset 6); a dictionary as large as the
** output suffices, since no match reaches before the output's start. */
static int lzma2_raw(const unsigned char *in, size_t n, unsigned char *out, size_t out_len) {
  lzma_options_lzma opt;
  if (lzma_lzma_preset(&opt, 6)) return bbb_error(BBB_EMEM, "rdata: cannot set up LZMA2");
  opt.dict_size = out_len < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : (uint32_t)out_len;
  lzma_filter filters[2] = { { LZMA_FILTER_LZMA2, &opt }, { LZMA_VLI_UNKNOWN, NULL } };
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_raw_decoder(&s, filters) != LZMA_OK) return bbb_error(BBB_EMEM, "rdata: cannot start the LZMA2 decoder");
  s.next_in = in;
  s.avail_in = n;
  s.next_out = out;
  s.avail_out = out_len;
  lzma_ret r = lzma_code(&s, LZMA_FINISH);
  size_t got = out_len - s.avail_out;
  lzma_end(&s);
  if (r != LZMA_STREAM_END && !(r == LZMA_OK && got == out_len))
    return bbb_error(BBB_EIO, "rdata: corrupted or truncated LZMA2 chunk (liblzma status %d, %zu of %zu bytes)",
                     (int)r, got, out_len);
  if (got != out_len)
    return bbb_error(BBB_EIO, "rdata: an LZMA2 chunk gives %zu bytes, its header says %zu", got, out_len);
  return BBB_OK;
}

/* One chunk of the .rdb as R_decompress1 (compress 1) or R_decompress3
** (compress 2 or 3) would read it: a 4-byte big-endian length, then (2, 3)
** a type byte, then the data. */
static int decompress_chunk(const unsigned char *p, size_t n, int method, unsigned char **out, size_t *out_len) {
  *out = NULL;
  if (n < 5) return bbb_error(BBB_EIO, "rdata: a lazy-load chunk of %zu bytes is too short", n);
  size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
  if (len > RD_MAX_IMAGE) return bbb_error(BBB_EIO, "rdata: a lazy-load chunk declares %zu bytes, more than %zu", len, RD_MAX_IMAGE);
  if (method == 1) {
    unsigned char *b;
    size_t got;
    int st = inflate_all(p + 4, n - 4, len ? len : 1, &b, &got, "a lazy-load chunk");
    if (st) return st;
    if (got != len) { free(b); return bbb_error(BBB_EIO, "rdata: a zlib chunk gives %zu bytes, its header says %zu", got, len); }
    *out = b;
    *out_len = got;
    return BBB_OK;
  }
  unsigned char type = p[4], *b = malloc(len ? len : 1);
  if (!b) return bbb_error(BBB_EMEM, "rdata: out of memory");
  int st = BBB_OK;
  if (type == '0') {
    if (n - 5 != len) st = bbb_error(BBB_EIO, "rdata: an uncompressed chunk holds %zu bytes, its header says %zu", n - 5, len);
    else memcpy(b, p + 5, len);
  } else if (type == 'Z' && method == 3) {
    st = lzma2_raw(p + 5, n - 5, b, len);
  } else if (type == '1' && method == 3) {
    unsigned char *z;
    size_t got;
    free(b);
    b = NULL;
    if (!(st = inflate_all(p + 5, n - 5, len ? len : 1, &z, &got, "a lazy-load chunk"))) {
      if (got != len) { free(z); st = bbb_error(BBB_EIO, "rdata: a zlib chunk gives %zu bytes, its header says %zu", got, len); }
      else b = z;
    }
  } else if (type == '2') {
    st = bbb_error(BBB_EIO, "rdata: bzip2-compressed lazy-load chunks are not supported (only zlib, xz and none)");
  } else {
    st = bbb_error(BBB_EIO, "rdata: unknown lazy-load chunk type 0x%02x for compression %d", type, method);
  }
  if (st) { free(b); return st; }
  *out = b;
  *out_len = len;
  return BBB_OK;
}

static rd_node *list_item(const rd_node *list, const char *name) {
  rd_node *names = list && list->type == RD_VECSXP ? get_attr(list, "names") : NULL;
  if (!names || names->type != RD_STRSXP || names->len != list->len) return NULL;
  for (int64_t i = 0; i < list->len; i++)
    if (names->items[i]->str && strcmp(names->items[i]->str, name) == 0) return list->items[i];
  return NULL;
}

static int64_t number_at(const rd_node *v, int64_t i) {
  if (!v || i >= v->len) return -1;
  if (v->type == RD_INTSXP || v->type == RD_LGLSXP) return v->ints[i] == RD_NA_INT ? -1 : v->ints[i];
  if (v->type == RD_REALSXP) return v->reals[i] >= 0 && v->reals[i] < 9e15 ? (int64_t)v->reals[i] : -1;
  return -1;
}

/* "a, b, c, ..." of the names of a list, for a message. */
static void list_names(const rd_node *list, char *buf, size_t cap) {
  rd_node *names = list && list->type == RD_VECSXP ? get_attr(list, "names") : NULL;
  size_t o = 0;
  buf[0] = 0;
  for (int64_t i = 0; names && names->type == RD_STRSXP && i < names->len && o + 8 < cap; i++) {
    const char *nm = names->items[i]->str ? names->items[i]->str : "NA";
    int w = snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", nm);
    if (w < 0 || (size_t)w >= cap - o) { snprintf(buf + (o > cap - 5 ? cap - 5 : o), 5, "..."); break; }
    o += (size_t)w;
  }
}

int bbb_rdata_parse_lazy(const unsigned char *rdx, size_t rdx_len, const unsigned char *rdb, size_t rdb_len,
                         const char *name, bbb_rdata_frame *out) {
  memset(out, 0, sizeof *out);
  bbb_arena *a = bbb_arena_new(RD_MAX_ARENA);
  if (!a) return bbb_error(BBB_EMEM, "rdata: out of memory");
  out->arena = a;
  unsigned char *index = NULL, *chunk = NULL;
  size_t index_len = 0, chunk_len = 0;
  rd_parser ps = { .arena = a }, ps2 = { .arena = a };
  rd_node *top = NULL, *obj = NULL;
  int st = inflate_all(rdx, rdx_len, RD_MAX_IMAGE, &index, &index_len, "the index (.rdx)");
  if (!st) st = parse_stream(index, index_len, 0, 1, &top, &ps);
  rd_node *vars = NULL, *entry = NULL;
  int64_t method = -1;
  if (!st) {
    vars = list_item(top, "variables");
    rd_node *comp = list_item(top, "compressed");
    method = number_at(comp, 0);
    if (!vars || vars->type != RD_VECSXP || !comp)
      st = bbb_error(BBB_EIO, "rdata: the index (.rdx) is not a list of variables, references and compressed");
    else if (method < 0 || method > 3)
      st = bbb_error(BBB_EIO, "rdata: the index (.rdx) names compression %lld, R knows 0 to 3", (long long)method);
  }
  if (!st && !(entry = list_item(vars, name))) {
    char names[256];
    list_names(vars, names, sizeof names);
    st = bbb_error(BBB_EIO, "rdata: no data set '%s' here (there are: %s)", name, names);
  }
  if (!st) {
    int64_t off = number_at(entry, 0), len = number_at(entry, 1);
    if (!entry || entry->len != 2 || off < 0 || len < 0 || (uint64_t)off > rdb_len || (uint64_t)len > rdb_len - (uint64_t)off)
      st = bbb_error(BBB_EIO, "rdata: data set '%s' lies at offset %lld, length %lld, outside the %zu bytes of the .rdb",
                     name, (long long)off, (long long)len, rdb_len);
    else if (method == 0)
      st = bbb_error(BBB_EIO, "rdata: uncompressed lazy-load databases (compression 0) are not supported");
    else
      st = decompress_chunk(rdb + off, (size_t)len, (int)method, &chunk, &chunk_len);
  }
  if (!st) st = parse_stream(chunk, chunk_len, 0, 1, &obj, &ps2);
  if (!st) {
    out->object_name = NULL;
    char *nm = bbb_arena_alloc(a, strlen(name) + 1);
    if (!nm) st = bbb_error(BBB_EMEM, "rdata: out of memory");
    else { strcpy(nm, name); out->object_name = nm; }
  }
  if (!st) st = frame_from(&ps2, obj, out);
  free(ps.refs);
  free(ps2.refs);
  free(index);
  free(chunk);
  if (st) bbb_rdata_frame_free(out);
  return st;
}

int bbb_rdata_load_lazy(const char *rdx_path, const char *rdb_path, const char *name, bbb_rdata_frame *out) {
  memset(out, 0, sizeof *out);
  unsigned char *rdx = NULL, *rdb = NULL;
  size_t nx = 0, nb = 0;
  int st = read_whole(rdx_path, &rdx, &nx);
  if (!st && (st = read_whole(rdb_path, &rdb, &nb))) { free(rdx); return st; }
  if (st) return st;
  st = bbb_rdata_parse_lazy(rdx, nx, rdb, nb, name, out);
  if (st) st = name_file(st, rdx_path);
  free(rdx);
  free(rdb);
  return st;
}

void bbb_rdata_frame_free(bbb_rdata_frame *f) {
  if (!f) return;
  bbb_arena_free(f->arena);
  memset(f, 0, sizeof *f);
}
