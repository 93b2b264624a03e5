/*
** fuzz_idx_gzip.c: libFuzzer harness for the IDX reader's gzip path. The
** input is an uncompressed IDX file; the harness gzips it (so the mutations
** reach the header checks through a valid stream), then appends the input's
** last byte as trailing garbage when the size is odd. Seeds:
** tests/fuzz/corpus/idx_gzip/.
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "io/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 20)) return 0;
  z_stream zs = { 0 };
  if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
  uLong cap = deflateBound(&zs, (uLong)size) + 1;
  unsigned char *gz = malloc(cap);
  if (!gz) { deflateEnd(&zs); return 0; }
  zs.next_in = (unsigned char *)data;
  zs.avail_in = (uInt)size;
  zs.next_out = gz;
  zs.avail_out = (uInt)(cap - 1);
  int z = deflate(&zs, Z_FINISH);
  size_t len = cap - 1 - zs.avail_out;
  deflateEnd(&zs);
  if (z != Z_STREAM_END) { free(gz); return 0; }
  if (size % 2 == 1) gz[len++] = data[size - 1];
  bbb_idx_opts o = bbb_idx_defaults();
  o.max_bytes = 1 << 20;
  bbb_tensor *t = NULL;
  if (bbb_idx_parse_mem(&t, gz, len, "fuzz.gz", &o) == BBB_OK) {
    volatile float sum = 0;
    const bbb_float *d = bbb_data(t);
    for (int64_t i = 0; i < t->numel; i++) sum += d[i];
    bbb_tensor_release(t);
  }
  free(gz);
  return 0;
}
