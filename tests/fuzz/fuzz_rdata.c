/*
** fuzz_rdata.c: libFuzzer harness for the R data reader. Any bytes must give
** a frame or an error status, never a crash, leak or undefined behaviour.
** Seeds: tests/fuzz/corpus/rdata/.
*/
#include <stddef.h>
#include <stdint.h>

#include "io/rdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bbb_rdata_frame f;
  if (bbb_rdata_parse_frame(data, size, &f) == 0) {
    /* touch what a caller reads */
    volatile int64_t sum = 0;
    for (int j = 0; j < f.n_cols; j++)
      for (int64_t i = 0; i < f.n_rows; i++)
        sum += f.cols[j].numeric ? (int64_t)(f.cols[j].values[i] == f.cols[j].values[i]) : f.cols[j].codes[i];
  }
  bbb_rdata_frame_free(&f);
  return 0;
}
