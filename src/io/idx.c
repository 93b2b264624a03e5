/*
** idx.c: IDX files (the MNIST format), raw or gzipped, from a file or from
** memory. Nothing in a header is trusted: the declared size must match the
** file (raw) or the gzip trailer (gzip) before anything is allocated, gzip
** output is capped, and the bytes are converted to floats in small chunks so
** the whole byte array never exists next to the floats.
*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/idx.h"
#include "io/input.h"

#define IO_CHUNK 65536

/* Where the bytes come from: a file or a memory block, raw or gzipped. */
typedef struct {
  const char *name;            /* for messages */
  FILE *fp;                    /* NULL: read from mem */
  const unsigned char *mem;
  size_t mem_len, mem_pos;
  uint64_t in_size;            /* bytes of input (file size or mem_len) */
  int gz;                      /* gzip stream */
  z_stream zs;
  int z_ready, z_end;
  unsigned char in[IO_CHUNK];
} idx_src;

/* Up to n raw input bytes into buf; returns the count (0 at the end), -1 on error. */
static int64_t src_raw(idx_src *s, unsigned char *buf, size_t n) {
  if (s->fp) {
    size_t r = fread(buf, 1, n, s->fp);
    if (r < n && ferror(s->fp)) return -1;
    return (int64_t)r;
  }
  size_t left = s->mem_len - s->mem_pos, r = n < left ? n : left;
  memcpy(buf, s->mem + s->mem_pos, r);
  s->mem_pos += r;
  return (int64_t)r;
}

/* Reads exactly up to n decoded bytes into buf; returns the count, which is
** short only at the end of the data; a status < 0 on a read or gzip error. */
static int64_t src_read(idx_src *s, unsigned char *buf, size_t n, int *st) {
  if (!s->gz) {
    int64_t r = src_raw(s, buf, n);
    if (r < 0) *st = bbb_error(BBB_EIO, "idx: cannot read '%s': %s", s->name, strerror(errno));
    return r;
  }
  size_t got = 0;
  while (got < n && !s->z_end) {
    if (s->zs.avail_in == 0) {
      int64_t r = src_raw(s, s->in, sizeof s->in);
      if (r < 0) { *st = bbb_error(BBB_EIO, "idx: cannot read '%s': %s", s->name, strerror(errno)); return -1; }
      if (r == 0) {
        *st = bbb_error(BBB_EIO, "idx: '%s': the gzip stream is truncated", s->name);
        return -1;
      }
      s->zs.next_in = s->in;
      s->zs.avail_in = (uInt)r;
    }
    s->zs.next_out = buf + got;
    s->zs.avail_out = (uInt)(n - got);
    int z = inflate(&s->zs, Z_NO_FLUSH);
    got = n - s->zs.avail_out;
    if (z == Z_STREAM_END) s->z_end = 1;
    else if (z != Z_OK && z != Z_BUF_ERROR) {
      *st = bbb_error(BBB_EIO, "idx: '%s': corrupt gzip stream (%s)", s->name,
                      s->zs.msg ? s->zs.msg : "inflate failed");
      return -1;
    }
  }
  return (int64_t)got;
}

/* After the last data byte: the stream must end there, with nothing after it. */
static int src_check_end(idx_src *s, uint64_t expect) {
  unsigned char extra[16];
  int st = BBB_OK;
  int64_t r = src_read(s, extra, sizeof extra, &st);
  if (r < 0) return st;
  if (r > 0)
    return bbb_error(BBB_EIO, "idx: '%s' holds more data than its header declares (%llu bytes)",
                     s->name, (unsigned long long)expect);
  if (s->gz) {
    int64_t t = s->zs.avail_in > 0 ? 1 : src_raw(s, extra, 1);
    if (t != 0)
      return bbb_error(BBB_EIO, "idx: '%s' has trailing bytes after its gzip stream", s->name);
  }
  return BBB_OK;
}

/* The ISIZE field of a gzip trailer: the uncompressed size mod 2^32. */
static int src_gzip_isize(idx_src *s, uint32_t *isize) {
  unsigned char t[4];
  if (s->in_size < 18) return bbb_error(BBB_EIO, "idx: '%s' is too short for a gzip stream", s->name);
  if (s->fp) {
    long here = ftell(s->fp);
    if (here < 0 || fseek(s->fp, -4, SEEK_END) != 0 || fread(t, 1, 4, s->fp) != 4 ||
        fseek(s->fp, here, SEEK_SET) != 0)
      return bbb_error(BBB_EIO, "idx: cannot read '%s': %s", s->name, strerror(errno));
  } else {
    memcpy(t, s->mem + s->mem_len - 4, 4);
  }
  *isize = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
  return BBB_OK;
}

static int idx_parse(bbb_tensor **out, idx_src *s, const bbb_idx_opts *o) {
  unsigned char head[4], dimb[16];
  int st = BBB_OK;
  int64_t r = src_read(s, head, 4, &st);
  if (r < 0) return st;
  if (r < 4) return bbb_error(BBB_EIO, "idx: '%s' is too short for an IDX header (%lld bytes)",
                              s->name, (long long)r);
  int nd = head[3];
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || nd < 1 || nd > 4)
    return bbb_error(BBB_EIO, "idx: '%s' is not an IDX file of unsigned bytes with 1 to 4 "
                     "dimensions (magic %02x %02x %02x %02x)", s->name, head[0], head[1], head[2], head[3]);
  r = src_read(s, dimb, (size_t)(4 * nd), &st);
  if (r < 0) return st;
  if (r < 4 * nd) return bbb_error(BBB_EIO, "idx: '%s' ends inside its header", s->name);
  int64_t shape[4];
  uint64_t n = 1;
  for (int d = 0; d < nd; d++) {
    shape[d] = (int64_t)dimb[4 * d] << 24 | dimb[4 * d + 1] << 16 | dimb[4 * d + 2] << 8 | dimb[4 * d + 3];
    if (shape[d] <= 0 || shape[d] > (1 << 28))
      return bbb_error(BBB_EIO, "idx: '%s' has an implausible size %lld in dimension %d",
                       s->name, (long long)shape[d], d + 1);
    if ((uint64_t)shape[d] > o->max_bytes / n)   /* n * shape[d] > max_bytes, without overflow */
      return bbb_error(BBB_EIO, "idx: '%s' declares more data bytes than the limit of %llu "
                       "(max_bytes): size %lld in dimension %d", s->name,
                       (unsigned long long)o->max_bytes, (long long)shape[d], d + 1);
    n *= (uint64_t)shape[d];
  }
  uint64_t total = 4 + 4 * (uint64_t)nd + n;
  if (!s->gz && total != s->in_size)
    return bbb_error(BBB_EIO, "idx: '%s' declares %llu data bytes, so %llu bytes in all, but holds %llu",
                     s->name, (unsigned long long)n, (unsigned long long)total,
                     (unsigned long long)s->in_size);
  if (s->gz) {
    uint32_t isize = 0;
    if ((st = src_gzip_isize(s, &isize)) != BBB_OK) return st;
    if (isize != (uint32_t)total)
      return bbb_error(BBB_EIO, "idx: '%s' declares %llu bytes in all, but its gzip trailer says "
                       "%lu (mod 2^32)", s->name, (unsigned long long)total, (unsigned long)isize);
  }
  int64_t rows = shape[0];
  if (o->limit >= 0 && o->limit < shape[0]) rows = o->limit;
  uint64_t want = n / (uint64_t)shape[0] * (uint64_t)rows;
  shape[0] = rows;
  bbb_tensor *t = bbb_tensor_new(nd, shape);
  if (!t) return bbb_error(BBB_EMEM, "idx: out of memory for '%s'", s->name);
  bbb_float *dst = bbb_data(t);
  unsigned char *buf = malloc(IO_CHUNK);
  if (!buf) { bbb_tensor_release(t); return bbb_error(BBB_EMEM, "idx: out of memory for '%s'", s->name); }
  float scale = (float)o->scale, offset = (float)o->offset;
  uint64_t got = 0;
  while (got < want) {
    size_t k = want - got < IO_CHUNK ? (size_t)(want - got) : IO_CHUNK;
    r = src_read(s, buf, k, &st);
    if (r < 0) break;
    for (int64_t i = 0; i < r; i++) dst[got + (uint64_t)i] = (bbb_float)(buf[i] * scale + offset);
    got += (uint64_t)r;
    if ((size_t)r < k) {
      st = bbb_error(BBB_EIO, "idx: '%s' is truncated: %llu of %llu data bytes", s->name,
                     (unsigned long long)got, (unsigned long long)n);
      break;
    }
  }
  free(buf);
  if (!st && want == n) st = src_check_end(s, n);
  if (st) { bbb_tensor_release(t); return st; }
  *out = t;
  return BBB_OK;
}

static int src_start(idx_src *s) {
  unsigned char m[2] = { 0, 0 };
  if (s->fp) {
    size_t r = fread(m, 1, 2, s->fp);
    if (fseek(s->fp, 0, SEEK_SET) != 0)
      return bbb_error(BBB_EIO, "idx: cannot read '%s': %s", s->name, strerror(errno));
    if (r < 2) m[0] = 0;
  } else if (s->mem_len >= 2) {
    m[0] = s->mem[0]; m[1] = s->mem[1];
  }
  s->gz = m[0] == 0x1f && m[1] == 0x8b;
  if (s->gz) {
    memset(&s->zs, 0, sizeof s->zs);
    if (inflateInit2(&s->zs, 16 + MAX_WBITS) != Z_OK)
      return bbb_error(BBB_EMEM, "idx: out of memory for '%s'", s->name);
    s->z_ready = 1;
  }
  return BBB_OK;
}

static void src_finish(idx_src *s) {
  if (s->z_ready) inflateEnd(&s->zs);
  if (s->fp) fclose(s->fp);
}

bbb_idx_opts bbb_idx_defaults(void) {
  bbb_idx_opts o = { 1.0, 0.0, -1, BBB_IDX_MAX_BYTES };
  return o;
}

int bbb_idx_load_opts(bbb_tensor **out, const char *path, const bbb_idx_opts *o) {
  *out = NULL;
  int fd;
  uint64_t size;
  int st = bbb_open_input(path, "idx", &fd, &size);
  if (st) return st;
  idx_src *s = calloc(1, sizeof *s);
  if (!s) { close(fd); return bbb_error(BBB_EMEM, "idx: out of memory for '%s'", path); }
  s->name = path;
  s->fp = fdopen(fd, "rb");
  if (!s->fp) {
    st = bbb_error(BBB_EIO, "idx: cannot open '%s': %s", path, strerror(errno));
    close(fd);
    free(s);
    return st;
  }
  s->in_size = size;
  st = src_start(s);
  if (!st) st = idx_parse(out, s, o);
  src_finish(s);
  free(s);
  return st;
}

int bbb_idx_parse_mem(bbb_tensor **out, const unsigned char *data, size_t len, const char *name,
                      const bbb_idx_opts *o) {
  *out = NULL;
  idx_src *s = calloc(1, sizeof *s);
  if (!s) return bbb_error(BBB_EMEM, "idx: out of memory for '%s'", name);
  s->name = name;
  s->mem = data;
  s->mem_len = len;
  s->in_size = len;
  int st = src_start(s);
  if (!st) st = idx_parse(out, s, o);
  src_finish(s);
  free(s);
  return st;
}

int bbb_idx_load(bbb_tensor **out, const char *path, double scale, double offset, int64_t limit) {
  bbb_idx_opts o = bbb_idx_defaults();
  o.scale = scale; o.offset = offset; o.limit = limit;
  return bbb_idx_load_opts(out, path, &o);
}
