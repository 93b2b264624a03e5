/*
** parallel.c: thread count and the range splitter.
*/
#include <omp.h>

#include "parallel.h"

void openblas_set_num_threads(int num_threads);

static int nthreads;

void bbb_set_num_threads(int n) {
  if (n < 1) n = 1;
  nthreads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int bbb_get_num_threads(void) {
  return nthreads > 0 ? nthreads : omp_get_max_threads();
}

void bbb_parallel_for(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx) {
  int64_t nt = bbb_get_num_threads();
  if (grain < 1) grain = 1;
  if (n / grain < nt) nt = n / grain;
  if (nt <= 1) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  #pragma omp parallel num_threads((int)nt)
  {
    int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    int64_t lo = n * t / k, hi = n * (t + 1) / k;
    if (hi > lo) fn(ctx, lo, hi);
  }
}
