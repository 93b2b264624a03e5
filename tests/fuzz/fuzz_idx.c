/*
** fuzz_idx.c: libFuzzer harness for the IDX reader on raw bytes, which it
** reads as a raw IDX file or, with the gzip magic, as a gzip stream. Any
** input must give a tensor or an error status, never a crash, leak or
** undefined behaviour. Seeds: tests/fuzz/corpus/idx/.
*/
#include <stddef.h>
#include <stdint.h>

#include "io/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bbb_idx_opts o = bbb_idx_defaults();
  o.max_bytes = 1 << 20;                  /* keep allocations small */
  o.limit = size % 3 == 0 ? 1 : -1;       /* the limited path too */
  bbb_tensor *t = NULL;
  if (bbb_idx_parse_mem(&t, data, size, "fuzz", &o) == BBB_OK) {
    volatile float sum = 0;               /* touch what a caller reads */
    const bbb_float *d = bbb_data(t);
    for (int64_t i = 0; i < t->numel; i++) sum += d[i];
    bbb_tensor_release(t);
  }
  return 0;
}
