/*
** io.c: IDX files through zlib, which reads gzipped and plain files alike.
*/
#include <zlib.h>
#include <stdlib.h>

#include "io.h"

int bbb_idx_load(bbb_tensor **out, const char *path, double scale, double offset, int64_t limit) {
  unsigned char head[4], dimb[4 * 4];
  *out = NULL;
  gzFile f = gzopen(path, "rb");
  if (!f) return bbb_error(BBB_EIO, "idx: cannot open '%s'", path);
  int st = BBB_OK;
  if (gzread(f, head, 4) != 4) {
    st = bbb_error(BBB_EIO, "idx: '%s' is too short for an IDX header", path);
    goto done;
  }
  int nd = head[3];
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || nd < 1 || nd > 4) {
    st = bbb_error(BBB_EIO, "idx: '%s' is not an IDX file of unsigned bytes with 1 to 4 "
                   "dimensions (magic %02x %02x %02x %02x)", path, head[0], head[1], head[2], head[3]);
    goto done;
  }
  if (gzread(f, dimb, (unsigned)(4 * nd)) != 4 * nd) {
    st = bbb_error(BBB_EIO, "idx: '%s' ends inside its header", path);
    goto done;
  }
  int64_t shape[4], n = 1;
  for (int d = 0; d < nd; d++) {
    shape[d] = (int64_t)dimb[4 * d] << 24 | dimb[4 * d + 1] << 16 | dimb[4 * d + 2] << 8 | dimb[4 * d + 3];
    if (shape[d] <= 0 || shape[d] > (1 << 28) || (n *= shape[d]) > ((int64_t)1 << 31)) {
      st = bbb_error(BBB_EIO, "idx: '%s' has an implausible size %lld in dimension %d",
                     path, (long long)shape[d], d + 1);
      goto done;
    }
  }
  if (limit >= 0 && limit < shape[0]) { n = n / shape[0] * limit; shape[0] = limit; }
  unsigned char *buf = malloc((size_t)(n ? n : 1));
  bbb_tensor *t = bbb_tensor_new(nd, shape);
  if (!buf || !t) {
    free(buf); bbb_tensor_release(t);
    st = bbb_error(BBB_EMEM, "idx: out of memory for '%s'", path);
    goto done;
  }
  int64_t got = 0;
  while (got < n) {
    unsigned want = (unsigned)(n - got > (1 << 30) ? (1 << 30) : n - got);
    int r = gzread(f, buf + got, want);
    if (r <= 0) break;
    got += r;
  }
  if (got < n) {
    free(buf); bbb_tensor_release(t);
    st = bbb_error(BBB_EIO, "idx: '%s' is truncated: %lld of %lld data bytes", path,
                   (long long)got, (long long)n);
    goto done;
  }
  bbb_float *d = bbb_data(t);
  for (int64_t i = 0; i < n; i++) d[i] = (bbb_float)(buf[i] * scale + offset);
  free(buf);
  *out = t;
done:
  gzclose(f);
  return st;
}
