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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "rdata.h"
#include "tensor.h"

#define RD_MAX_DEPTH 64
#define RD_MAX_IMAGE ((size_t)1 << 26)     /* decompressed bytes */
#define RD_MAX_ARENA ((size_t)1 << 28)     /* bytes of parsed items */
#define RD_MAX_FILE ((size_t)1 << 27)      /* compressed bytes */
#define RD_NA_INT INT32_MIN

enum {
  RD_NILSXP = 0, RD_SYMSXP = 1, RD_LISTSXP = 2, RD_CHARSXP = 9, RD_LGLSXP = 10,
  RD_INTSXP = 13, RD_STRSXP = 16, RD_VECSXP = 19,
  RD_REFSXP = 255, RD_NILVALUE = 254
};

#define RD_IS_OBJECT (1 << 8)
#define RD_HAS_ATTR (1 << 9)
#define RD_HAS_TAG (1 << 10)

/* ---- the arena ---- */

typedef struct rd_arena { void **ptrs; size_t n, cap, bytes; } rd_arena;

/* NULL when out of memory or past RD_MAX_ARENA (a stream of tiny items
** must not expand into gigabytes of nodes). */
static void *arena_alloc(rd_arena *a, size_t bytes) {
  if (bytes > RD_MAX_ARENA - a->bytes) return NULL;
  a->bytes += bytes + sizeof(void *);
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    void **p = realloc(a->ptrs, cap * sizeof *p);
    if (!p) return NULL;
    a->ptrs = p;
    a->cap = cap;
  }
  void *m = calloc(1, bytes ? bytes : 1);
  if (m) a->ptrs[a->n++] = m;
  return m;
}

static void arena_free(rd_arena *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n; i++) free(a->ptrs[i]);
  free(a->ptrs);
  free(a);
}

/* ---- the item tree ---- */

typedef struct rd_node {
  int type;                   /* one of the RD_*SXP above */
  int64_t len;                /* vectors */
  int32_t *ints;              /* INTSXP, LGLSXP */
  char *str;                  /* CHARSXP (NULL: NA), SYMSXP name */
  struct rd_node **items;     /* STRSXP (CHARSXP nodes), VECSXP */
  struct rd_node *attr;       /* a pairlist or NULL */
  struct rd_node *tag, *car, *cdr;   /* LISTSXP */
} rd_node;

typedef struct rd_parser {
  const unsigned char *p;
  size_t n, pos;
  rd_arena *arena;
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
  rd_node *nd = arena_alloc(ps->arena, sizeof *nd);
  if (!nd) { bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)"); return NULL; }
  nd->type = type;
  return nd;
}

static int read_item(rd_parser *ps, int depth, rd_node **out);

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
  nd->str = arena_alloc(ps->arena, (size_t)len + 1);
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
    nd->ints = arena_alloc(ps->arena, (size_t)nd->len * sizeof(int32_t));
    if (!nd->ints) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
    for (int64_t i = 0; i < nd->len; i++)
      if ((st = read_int(ps, &nd->ints[i]))) return st;
    return BBB_OK;
  }
  /* STRSXP (each element at least flags + length) or VECSXP (at least flags) */
  if ((st = read_length(ps, type == RD_STRSXP ? 8 : 4, &nd->len))) return st;
  nd->items = arena_alloc(ps->arena, (size_t)nd->len * sizeof(rd_node *));
  if (!nd->items) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  for (int64_t i = 0; i < nd->len; i++) {
    st = type == RD_STRSXP ? read_charsxp(ps, &nd->items[i]) : read_item(ps, depth + 1, &nd->items[i]);
    if (st) return st;
  }
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
    case RD_INTSXP: case RD_LGLSXP: case RD_STRSXP: case RD_VECSXP: {
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

static int to_frame(rd_parser *ps, rd_node *top, bbb_rdata_frame *f) {
  if (!top || top->type != RD_LISTSXP || !top->car)
    return bbb_error(BBB_EIO, "rdata: the file does not hold a pairlist of named objects (found: %s)", what(top));
  if (top->tag && top->tag->type == RD_SYMSXP) f->object_name = top->tag->str;
  rd_node *df = top->car;
  if (df->type != RD_VECSXP || !has_class(df, "data.frame"))
    return bbb_error(BBB_EIO, "rdata: object '%s' is not a data frame (found: %s%s)",
                     f->object_name ? f->object_name : "?", what(df),
                     df->type == RD_VECSXP ? " without class data.frame" : "");
  if (df->len > INT_MAX) return bbb_error(BBB_EIO, "rdata: too many columns (%lld)", (long long)df->len);
  rd_node *names = get_attr(df, "names");
  if (!names || names->type != RD_STRSXP || names->len != df->len)
    return bbb_error(BBB_EIO, "rdata: the data frame's names (found: %s of length %lld) do not fit its %lld columns",
                     what(names), names ? (long long)names->len : 0LL, (long long)df->len);
  int64_t n_rows = frame_rows(df);
  if (n_rows < 0) return bbb_error(BBB_EIO, "rdata: the data frame has no usable row.names");
  f->n_rows = n_rows;
  f->n_cols = (int)df->len;
  f->cols = arena_alloc(ps->arena, (size_t)df->len * sizeof *f->cols);
  if (!f->cols) return bbb_error(BBB_EMEM, "rdata: out of memory (or more than 256 MiB of items)");
  for (int j = 0; j < f->n_cols; j++) {
    bbb_rdata_factor *c = &f->cols[j];
    rd_node *col = df->items[j], *lev = get_attr(col, "levels");
    c->name = names->items[j]->str ? names->items[j]->str : "NA";
    if (col->type != RD_INTSXP || !has_class(col, "factor") || !lev || lev->type != RD_STRSXP)
      return bbb_error(BBB_EIO, "rdata: column %d ('%s') is not a factor (found: %s%s)", j + 1, c->name,
                       what(col), col->type == RD_INTSXP ? " without factor class and levels" : "");
    if (col->len != n_rows)
      return bbb_error(BBB_EIO, "rdata: column %d ('%s') has %lld rows, the frame %lld", j + 1,
                       c->name, (long long)col->len, (long long)n_rows);
    if (lev->len > INT_MAX) return bbb_error(BBB_EIO, "rdata: column %d has too many levels", j + 1);
    c->n_levels = (int)lev->len;
    c->levels = arena_alloc(ps->arena, (size_t)lev->len * sizeof(char *));
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
  }
  return BBB_OK;
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

static int parse_image(const unsigned char *p, size_t n, bbb_rdata_frame *f) {
  static const char magic[] = "RDX2\nX\n";
  if (n < 7 || memcmp(p, magic, 7) != 0) {
    if (n >= 5 && (memcmp(p, "RDA", 3) == 0 || memcmp(p, "RDB", 3) == 0 || memcmp(p, "RDX", 3) == 0))
      return bbb_error(BBB_EIO, "rdata: only XDR format version 2 (RDX2) is supported, found '%.4s'",
                       (const char *)p);
    return bbb_error(BBB_EIO, "rdata: not an R data file (no RDX2 header)");
  }
  rd_parser ps = { .p = p, .n = n, .pos = 7, .arena = f->arena };
  int32_t version = 0, writer = 0, reader = 0;
  int st = read_int(&ps, &version);
  if (!st) st = read_int(&ps, &writer);
  if (!st) st = read_int(&ps, &reader);
  if (!st && version != 2)
    st = bbb_error(BBB_EIO, "rdata: serialization version %d, only version 2 is supported", (int)version);
  rd_node *top = NULL;
  if (!st) st = read_item(&ps, 0, &top);
  if (!st) st = to_frame(&ps, top, f);
  free(ps.refs);
  return st;
}

int bbb_rdata_parse_frame(const unsigned char *buf, size_t len, bbb_rdata_frame *out) {
  static const unsigned char xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };
  memset(out, 0, sizeof *out);
  rd_arena *a = calloc(1, sizeof *a);
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
  } else if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
    st = bbb_error(BBB_EIO, "rdata: gzip-compressed R data is not supported (only xz)");
  } else if (len >= 3 && buf[0] == 'B' && buf[1] == 'Z' && buf[2] == 'h') {
    st = bbb_error(BBB_EIO, "rdata: bzip2-compressed R data is not supported (only xz)");
  } else {
    st = parse_image(buf, len, out);
  }
  if (st) bbb_rdata_frame_free(out);
  return st;
}

int bbb_rdata_load_frame(const char *path, bbb_rdata_frame *out) {
  memset(out, 0, sizeof *out);
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
  if (!st) {
    st = bbb_rdata_parse_frame(buf, n, out);
    if (st) {
      /* name the file in front of the parser's message */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", bbb_errmsg());
      st = bbb_error(st, "%s (in '%s')", msg, path);
    }
  }
  free(buf);
  return st;
}

void bbb_rdata_frame_free(bbb_rdata_frame *f) {
  if (!f) return;
  arena_free(f->arena);
  memset(f, 0, sizeof *f);
}
