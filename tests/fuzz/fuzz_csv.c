/*
** fuzz_csv.c: libFuzzer harness for the CSV reader. The first byte picks
** options (header, dropping missing values, delimiter, a target column);
** the rest is the file. Any bytes must give a table or an error status,
** never a crash, leak or undefined behaviour. Seeds: tests/fuzz/corpus/csv/.
*/
#include <stddef.h>
#include <stdint.h>

#include "io/csvread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const char *const cats[] = { "b" };
  bbb_csv_options o = bbb_csv_defaults();
  o.header = !(data[0] & 1);
  o.drop_missing = (data[0] >> 1) & 1;
  o.delim = (data[0] >> 2) & 1 ? ';' : ',';
  if ((data[0] >> 3) & 1) o.target = o.header ? "a" : "V1";
  if ((data[0] >> 4) & 1 && o.header) { o.categorical = cats; o.n_categorical = 1; }
  o.max_levels = 64;
  bbb_csv_table t;
  if (bbb_csv_parse(data + 1, size - 1, &o, &t) == 0) {
    volatile float sum = 0;
    const float *x = bbb_data(t.x);
    for (int64_t i = 0; i < t.n_rows * t.n_cols; i++) sum += x[i];
    for (int j = 0; j < t.n_cols; j++)
      for (int k = 0; k < t.cols[j].n_levels; k++) sum += (float)t.cols[j].levels[k][0];
    if (t.has_target) sum += bbb_data(t.y)[t.n_rows - 1];
  }
  bbb_csv_free(&t);
  return 0;
}
