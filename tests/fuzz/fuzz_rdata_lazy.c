/*
** fuzz_rdata_lazy.c: libFuzzer harness for lazy-load databases. The input
** is a 2-byte big-endian length n, n bytes of index (.rdx) and the rest as
** the database (.rdb); the data set "d" is read. Any bytes must give a
** frame or an error status, never a crash, leak or undefined behaviour.
** Seeds: tests/fuzz/corpus/rdata_lazy/.
*/
#include <stddef.h>
#include <stdint.h>

#include "io/rdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t n = (size_t)data[0] << 8 | data[1];
  if (n > size - 2) return 0;
  bbb_rdata_frame f;
  if (bbb_rdata_parse_lazy(data + 2, n, data + 2 + n, size - 2 - n, "d", &f) == 0) {
    volatile double sum = 0;
    for (int j = 0; j < f.n_cols; j++)
      for (int64_t i = 0; i < f.n_rows; i++)
        sum += f.cols[j].numeric ? f.cols[j].values[i] : f.cols[j].codes[i];
  }
  bbb_rdata_frame_free(&f);
  return 0;
}
