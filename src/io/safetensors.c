/*
** safetensors.c: checkpoint writes (through bbb_write_atomic) and
** bounds-checked reads.
*/
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/input.h"
#include "io/safetensors.h"
#include "io/wfile.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (float32 data is copied as is)"
#endif

int bbb_st_save(const char *path, const char *header, uint64_t header_len,
                bbb_tensor *const *tensors, int n) {
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)(header_len >> (8 * k));
  const void **parts = malloc((size_t)(n + 2) * sizeof *parts);
  size_t *lens = malloc((size_t)(n + 2) * sizeof *lens);
  if (!parts || !lens) {
    free(parts); free(lens);
    return bbb_error(BBB_EMEM, "save: out of memory");
  }
  parts[0] = len8, lens[0] = 8;
  parts[1] = header, lens[1] = (size_t)header_len;
  for (int i = 0; i < n; i++)
    parts[i + 2] = bbb_data(tensors[i]), lens[i + 2] = (size_t)tensors[i]->numel * sizeof(bbb_float);
  int st = bbb_write_atomic(path, parts, lens, n + 2, "save");
  free(parts); free(lens);
  return st;
}

int bbb_st_open(bbb_st_file *f, const char *path) {
  f->fd = -1;
  f->size = 0;
  return bbb_open_input(path, "load", &f->fd, &f->size);
}

void bbb_st_close(bbb_st_file *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

/* n bytes at offset off of the file; a short read is an error. */
static int read_at(const bbb_st_file *f, const char *path, void *buf, size_t n, uint64_t off) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = pread(f->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return bbb_error(BBB_EIO, "load: '%s' could not be read: %s", path,
                       r < 0 ? strerror(errno) : "the file is shorter than when it was opened");
    p += r;
    off += (uint64_t)r;
    n -= (size_t)r;
  }
  return BBB_OK;
}

int bbb_st_read_header(const bbb_st_file *f, const char *path, char **header,
                       uint64_t *header_len, uint64_t *data_len) {
  uint64_t size = f->size, hl = 0;
  *header = NULL;
  unsigned char len8[8];
  if (size < 8)
    return bbb_error(BBB_EIO, "load: '%s' is too short for a safetensors header (%llu bytes)",
                     path, (unsigned long long)size);
  int st = read_at(f, path, len8, 8, 0);
  if (st) return st;
  for (int k = 0; k < 8; k++) hl |= (uint64_t)len8[k] << (8 * k);
  if (hl > size - 8)
    return bbb_error(BBB_EIO, "load: '%s' declares a %llu-byte header but holds only %llu bytes "
                     "after the length field", path, (unsigned long long)hl,
                     (unsigned long long)(size - 8));
  if (hl > BBB_ST_MAX_HEADER)
    return bbb_error(BBB_EIO, "load: '%s' declares a %llu-byte header (at most %llu)", path,
                     (unsigned long long)hl, (unsigned long long)BBB_ST_MAX_HEADER);
  char *h = malloc((size_t)hl + 1);
  if (!h) return bbb_error(BBB_EMEM, "load: out of memory for the header");
  if ((st = read_at(f, path, h, (size_t)hl, 8))) { free(h); return st; }
  h[hl] = '\0';
  *header = h;
  *header_len = hl;
  *data_len = size - 8 - hl;
  return BBB_OK;
}

int bbb_st_read_tensor(bbb_tensor **out, const bbb_st_file *f, const char *path,
                       const char *name, uint64_t data_start, uint64_t begin, uint64_t end,
                       int ndim, const int64_t *shape) {
  int64_t numel;
  uint64_t size = f->size;
  *out = NULL;
  int st = bbb_shape_check(ndim, shape, &numel);
  if (st) return st;
  if (begin > end || data_start > size || end > size - data_start)
    return bbb_error(BBB_EIO, "load: '%s': tensor %s: data range [%llu, %llu) lies outside the file",
                     path, name, (unsigned long long)begin, (unsigned long long)end);
  if (end - begin != (uint64_t)numel * sizeof(bbb_float))
    return bbb_error(BBB_EIO, "load: '%s': tensor %s: %llu data bytes do not hold %lld float32 values",
                     path, name, (unsigned long long)(end - begin), (long long)numel);
  bbb_tensor *t = bbb_tensor_new(ndim, shape);
  if (!t) return bbb_errstatus();
  st = read_at(f, path, bbb_data(t), (size_t)numel * sizeof(bbb_float), data_start + begin);
  if (st) { bbb_tensor_release(t); return st; }
  /* A NaN or an infinity in saved weights or optimizer state is a broken
  ** run or a broken file: it would only reappear as a NaN loss later. */
  const bbb_float *d = bbb_data(t);
  for (int64_t i = 0; i < numel; i++)
    if (!isfinite(d[i])) {
      st = bbb_error(BBB_EVALUE, "load: '%s': tensor %s holds %s at element %lld (of %lld): "
                     "bbb loads only finite values", path, name,
                     isnan(d[i]) ? "NaN" : d[i] > 0 ? "inf" : "-inf", (long long)i + 1,
                     (long long)numel);
      bbb_tensor_release(t);
      return st;
    }
  *out = t;
  return BBB_OK;
}

/* ---- duplicate keys: a JSON decoder keeps the last of two equal keys, so
** a header naming a tensor twice (or giving an entry two data_offsets)
** would load silently as one. This walk finds them; it checks only what it
** needs to stay in bounds, the decoder checks the rest. */

typedef struct { const char *s; size_t n, at; char *dup; size_t dupn; int found; } key_walk;
typedef struct { char *p; size_t n; } key_str;

static void skip_ws(key_walk *w) {
  while (w->at < w->n && (w->s[w->at] == ' ' || w->s[w->at] == '\t' || w->s[w->at] == '\n' ||
                          w->s[w->at] == '\r'))
    w->at++;
}

static int hex4(const char *s, unsigned *v) {
  *v = 0;
  for (int k = 0; k < 4; k++) {
    char c = s[k];
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
               : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
    if (d > 15) return 0;
    *v = *v * 16 + d;
  }
  return 1;
}

/* A string at w->at (on its quote), decoded into out (NULL: skipped). */
static int walk_string(key_walk *w, key_str *out) {
  size_t start = ++w->at, len = 0;
  char *p = NULL;
  if (out) {
    size_t end = start;
    while (end < w->n && w->s[end] != '"') end += w->s[end] == '\\' ? 2 : 1;
    p = malloc(end - start + 1);   /* decoding never lengthens the text */
    if (!p) return -1;
  }
  while (w->at < w->n && w->s[w->at] != '"') {
    unsigned char c = (unsigned char)w->s[w->at++];
    unsigned cp = c;
    if (c == '\\') {
      if (w->at >= w->n) break;
      char e = w->s[w->at++];
      if (e == 'u') {
        if (w->at + 4 > w->n || !hex4(w->s + w->at, &cp)) break;
        w->at += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && w->at + 6 <= w->n && w->s[w->at] == '\\' &&
            w->s[w->at + 1] == 'u') {
          unsigned lo;
          if (hex4(w->s + w->at + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            w->at += 6;
          }
        }
      } else {
        cp = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b'
           : e == 'f' ? '\f' : (unsigned char)e;
      }
      if (p) {   /* UTF-8 (at most as long as the escape it replaces) */
        if (cp < 0x80) p[len++] = (char)cp;
        else if (cp < 0x800) { p[len++] = (char)(0xC0 | cp >> 6); p[len++] = (char)(0x80 | (cp & 63)); }
        else if (cp < 0x10000) {
          p[len++] = (char)(0xE0 | cp >> 12); p[len++] = (char)(0x80 | ((cp >> 6) & 63));
          p[len++] = (char)(0x80 | (cp & 63));
        } else {
          p[len++] = (char)(0xF0 | cp >> 18); p[len++] = (char)(0x80 | ((cp >> 12) & 63));
          p[len++] = (char)(0x80 | ((cp >> 6) & 63)); p[len++] = (char)(0x80 | (cp & 63));
        }
      }
    } else if (p) {
      p[len++] = (char)c;
    }
  }
  if (w->at >= w->n) { free(p); return -2; }   /* unterminated: the decoder says so */
  w->at++;
  if (out) { out->p = p; out->n = len; }
  return 0;
}

static int key_cmp(const void *a, const void *b) {
  const key_str *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->p, y->p, n);
  return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int walk_value(key_walk *w, int depth);

static int walk_object(key_walk *w, int depth) {
  key_str *keys = NULL;
  size_t nk = 0, cap = 0;
  int st = 0;
  w->at++;
  for (;;) {
    skip_ws(w);
    if (w->at >= w->n) { st = -2; break; }
    if (w->s[w->at] == '}') { w->at++; break; }
    if (w->s[w->at] == ',') { w->at++; continue; }
    if (w->s[w->at] != '"') { st = -2; break; }
    if (nk == cap) {
      size_t nc = cap ? 2 * cap : 16;
      key_str *k2 = realloc(keys, nc * sizeof *k2);
      if (!k2) { st = -1; break; }
      keys = k2;
      cap = nc;
    }
    if ((st = walk_string(w, &keys[nk]))) break;
    nk++;
    skip_ws(w);
    if (w->at >= w->n || w->s[w->at] != ':') { st = -2; break; }
    w->at++;
    if ((st = walk_value(w, depth + 1))) break;
  }
  if (!st && nk > 1) {
    qsort(keys, nk, sizeof *keys, key_cmp);
    for (size_t k = 1; k < nk && !w->found; k++)
      if (key_cmp(&keys[k - 1], &keys[k]) == 0) {
        size_t n = keys[k].n < w->dupn - 1 ? keys[k].n : w->dupn - 1;
        memcpy(w->dup, keys[k].p, n);
        w->dup[n] = '\0';
        w->found = 1;
      }
  }
  for (size_t k = 0; k < nk; k++) free(keys[k].p);
  free(keys);
  return st;
}

static int walk_value(key_walk *w, int depth) {
  if (depth > 64) return -2;
  skip_ws(w);
  if (w->at >= w->n) return -2;
  char c = w->s[w->at];
  if (c == '{') return walk_object(w, depth);
  if (c == '"') return walk_string(w, NULL);
  if (c == '[') {
    w->at++;
    for (;;) {
      skip_ws(w);
      if (w->at >= w->n) return -2;
      if (w->s[w->at] == ']') { w->at++; return 0; }
      if (w->s[w->at] == ',') { w->at++; continue; }
      int st = walk_value(w, depth + 1);
      if (st) return st;
    }
  }
  /* a number, true, false or null; anything that ends before it starts
  ** (a NUL, a stray '}') is malformed, and the walk must move on */
  size_t start = w->at;
  while (w->at < w->n && w->s[w->at] != '\0' && !strchr(",]} \t\r\n", w->s[w->at])) w->at++;
  return w->at > start ? 0 : -2;
}

int bbb_st_duplicate_key(const char *json, size_t n, int *found, char *dup, size_t dupn) {
  key_walk w = { json, n, 0, dup, dupn, 0 };
  int st = walk_value(&w, 0);
  *found = w.found;
  if (st == -1) return bbb_error(BBB_EMEM, "load: out of memory checking the header");
  return BBB_OK;
}
