/*
** parallel.c: thread count and the range splitter.
*/
#define _DEFAULT_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/parallel.h"

void openblas_set_num_threads(int num_threads);

static int nthreads;        /* the count asked for; 0: not set yet */
static int free_cores;      /* cores other processes left at the last look; 0: unknown */
static int follow = -1;     /* follow the load? -1: not decided yet */

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
  bbb_threads_asked();   /* settles the start-up state first */
  nthreads = (int)n;
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
  int nt = bbb_threads_asked();
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

/* Following the load. OpenMP threads that wait for a partner whose core
** another process took waste whole time slices, so a two-thread run beside
** a busy process was slower than a one-thread run. Every LOAD_PERIOD the
** cores' busy time (/proc/stat) less this process's own CPU time gives what
** other processes use; the count in use is then what the asked-for count
** leaves them: min(asked, cores - others), at least 1. Every op gives the
** same bits on any thread count (fixed chunks, GEMMs in fixed tiles), so
** changing it changes only the speed. BBB_FOLLOW_LOAD=0 keeps the count. */
#define LOAD_PERIOD_NS 200000000LL

static int64_t now_ns(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double bbb_clock(void) { return 1e-9 * (double)now_ns(CLOCK_MONOTONIC); }

/* Busy and total jiffies of all cores; 0 when /proc/stat is unreadable. */
static int read_cpu_times(long long *busy, long long *total) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return 0;
  long long v[8] = { 0 };
  int got = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (got < 4) return 0;
  *total = 0;
  for (int i = 0; i < 8; i++) *total += v[i];
  *busy = *total - v[3] - v[4];   /* less idle and iowait */
  return 1;
}

static void follow_load(void) {
  static int64_t next, own0;
  static long long busy0, total0;
  static int have;
  int64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
  if (now < next) return;
  next = now + LOAD_PERIOD_NS;
  long long busy, total;
  int64_t own = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  if (!read_cpu_times(&busy, &total)) { free_cores = 0; return; }
  if (have && total > total0) {
    double hz = (double)sysconf(_SC_CLK_TCK), cores = (double)online_cores();
    double wall = (double)(total - total0) / hz / cores;   /* seconds per core */
    double others = ((double)(busy - busy0) / hz - (double)(own - own0) * 1e-9) / wall;
    int n = (int)(cores - others + 0.3);
    free_cores = n < 1 ? 1 : n;
  }
  have = 1;
  busy0 = busy, total0 = total, own0 = own;
}

/* At the first call: the asked-for count starts as OpenMP's default
** (OMP_NUM_THREADS, else the cores), and OpenMP's own default drops to 1.
** OpenBLAS's OpenMP build threads a GEMM on that default, so it now runs
** every GEMM on one thread, and every parallel region names its count. */
int bbb_threads_asked(void) {
  if (follow < 0) {
    const char *e = getenv("BBB_FOLLOW_LOAD");
    follow = !(e && e[0] == '0');
    if (nthreads < 1) nthreads = omp_get_max_threads();
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
  }
  return nthreads;
}

int bbb_get_num_threads(void) {
  int asked = bbb_threads_asked();
  if (!follow) return asked;
  follow_load();
  return free_cores > 0 && free_cores < asked ? free_cores : asked;
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
  if (nt > n) nt = (int)n;
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
