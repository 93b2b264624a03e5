/*
** parallel.c: thread count and the range splitter.
*/
#define _DEFAULT_SOURCE
#include <omp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "parallel.h"

void openblas_set_num_threads(int num_threads);

static int nthreads;

/* A share is walked in slices of this many grains, checking the interrupt
** flag between them. fn's result on an index never depends on how the
** range was cut, so slicing changes no number. */
#define SLICE_GRAINS 64

static void run_sliced(bbb_range_fn fn, void *ctx, int64_t lo, int64_t hi, int64_t slice) {
  for (int64_t a = lo; a < hi && !bbb_interrupted(); a += slice)
    fn(ctx, a, hi - a > slice ? a + slice : hi);
}

static int64_t online_cores(void) {
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c > 0 ? (int64_t)c : 1;
}

/* More threads than this only oversubscribe the cores, and OpenBLAS sizes a
** buffer per thread: under a memory limit 64 threads on 2 cores spin forever
** in its allocator. */
int bbb_max_threads(void) {
  int64_t cap = BBB_THREADS_PER_CORE * online_cores();
  if (cap < BBB_THREADS_PER_CORE) cap = BBB_THREADS_PER_CORE;
  return cap > 1024 ? 1024 : (int)cap;
}

int bbb_set_num_threads(int64_t n) {
  int cap = bbb_max_threads();
  if (n < 1 || n > cap)
    return bbb_error(BBB_EARG, "set_num_threads: need 1..%d threads (%d per core, %lld cores), got %lld",
                     cap, BBB_THREADS_PER_CORE, (long long)online_cores(), (long long)n);
  nthreads = (int)n;
  omp_set_num_threads((int)n);
  openblas_set_num_threads((int)n);
  return BBB_OK;
}

/* OpenBLAS takes a buffer of about 128 MiB of address space per thread on
** its first GEMM with that many threads, and when the mapping fails under a
** `ulimit -v` it retries forever. So under a limit, before a GEMM on more
** threads than have already run one, try to map that much (and give it
** back at once): failing here is an out-of-memory error, not a hang. */
#define BLAS_BUFFER_BYTES ((size_t)128 << 20)
#define BLAS_HEADROOM_BYTES ((size_t)32 << 20)

int bbb_blas_room(const char *op) {
  static int threads_ok;
  int nt = bbb_get_num_threads();
  struct rlimit rl;
  if (nt <= threads_ok) return BBB_OK;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
    threads_ok = nt;   /* no limit: nothing to check until the thread count grows */
    return BBB_OK;
  }
  size_t need = (size_t)nt * BLAS_BUFFER_BYTES + BLAS_HEADROOM_BYTES;
  void *p = mmap(NULL, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return bbb_error(BBB_EMEM, "%s: out of memory: OpenBLAS needs about %zu MiB of workspace "
                     "for %d thread%s, more than the address-space limit (ulimit -v) leaves",
                     op, need >> 20, nt, nt == 1 ? "" : "s");
  munmap(p, need);
  threads_ok = nt;   /* its buffers stay with it from the first GEMM on */
  return BBB_OK;
}

int bbb_get_num_threads(void) {
  return nthreads > 0 ? nthreads : omp_get_max_threads();
}

static void parallel_for(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx, int sliced) {
  int64_t nt = bbb_get_num_threads();
  if (grain < 1) grain = 1;
  if (n / grain < nt) nt = n / grain;
  int64_t slice = grain * SLICE_GRAINS;
  if (nt <= 1) {
    if (n > 0 && sliced) run_sliced(fn, ctx, 0, n, slice);
    else if (n > 0) fn(ctx, 0, n);
    return;
  }
  #pragma omp parallel num_threads((int)nt)
  {
    int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    int64_t lo = n * t / k, hi = n * (t + 1) / k;
    if (hi > lo) {
      if (sliced) run_sliced(fn, ctx, lo, hi, slice);
      else fn(ctx, lo, hi);
    }
  }
}

void bbb_parallel_for(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx) {
  parallel_for(n, grain, fn, ctx, 1);
}

void bbb_parallel_for_whole(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx) {
  parallel_for(n, grain, fn, ctx, 0);
}

void bbb_parallel_each(int64_t n, bbb_range_fn fn, void *ctx) {
  int nt = bbb_get_num_threads();
  if (nt <= 1 || n < 1) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i, i + 1);
    return;
  }
  #pragma omp parallel num_threads(nt)
  {
    int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    for (int64_t i = t; i < n; i += k) fn(ctx, i, i + 1);
  }
}

typedef struct { bbb_chunk_sum_fn fn; const void *ctx; int64_t n; double *part; } sum_ctx;

static void sum_chunks(void *c, int64_t lo, int64_t hi) {
  sum_ctx *u = c;
  for (int64_t k = lo; k < hi; k++) {
    int64_t a = k * BBB_SUM_CHUNK, b = a + BBB_SUM_CHUNK < u->n ? a + BBB_SUM_CHUNK : u->n;
    u->part[k] = u->fn(u->ctx, a, b);
  }
}

double bbb_parallel_sum(int64_t n, bbb_chunk_sum_fn fn, const void *ctx) {
  int64_t nch = (n + BBB_SUM_CHUNK - 1) / BBB_SUM_CHUNK;
  if (nch <= 1) return n > 0 ? fn(ctx, 0, n) : 0;
  double stack[256], *part = nch <= 256 ? stack : malloc((size_t)nch * sizeof *part);
  if (!part) return fn(ctx, 0, n);   /* no memory for partials: one serial pass */
  sum_ctx u = { fn, ctx, n, part };
  bbb_parallel_for(nch, BBB_GRAIN_CHUNKS, sum_chunks, &u);
  double s = 0;
  for (int64_t k = 0; k < nch; k++) s += part[k];
  if (part != stack) free(part);
  return s;
}
