/*
** lbench.c: the module bbb.bench, timing floors for scripts/bench*.lua
** (not part of bbb.core: users never load it). A benchmark reports our
** ops as ratios against what the machine does without us (a bare sgemm, a
** scalar libm loop) measured in the same run, so the numbers mean the same
** on any machine.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include <lua.h>
#include <lauxlib.h>

#define MAX_REPS 1000

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int check_reps(lua_State *L, int i) {
  lua_Integer reps = luaL_checkinteger(L, i);
  luaL_argcheck(L, reps >= 1 && reps <= MAX_REPS, i, "reps must be in 1..1000");
  return (int)reps;
}

/* Same sizes as tensors would have, 64-byte aligned like their storage, and
** filled so the timing never meets denormals. */
static float *filled(int64_t n, unsigned seed) {
  float *p = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
  if (p) for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) * (16.0f / 16777216.0f) - 8.0f;   /* [-8, 8) */
  }
  return p;
}

/* sgemm(m, n, k, ta, tb, reps) -> median seconds of one bare
** cblas_sgemm computing C (m, n) = op(A) op(B) on preallocated buffers. */
static int l_bench_sgemm(lua_State *L) {
  lua_Integer m = luaL_checkinteger(L, 1), n = luaL_checkinteger(L, 2), k = luaL_checkinteger(L, 3);
  int ta = lua_toboolean(L, 4), tb = lua_toboolean(L, 5), reps = check_reps(L, 6);
  luaL_argcheck(L, m >= 1 && m <= 65536, 1, "m must be in 1..65536");
  luaL_argcheck(L, n >= 1 && n <= 65536, 2, "n must be in 1..65536");
  luaL_argcheck(L, k >= 1 && k <= 65536, 3, "k must be in 1..65536");
  double t[MAX_REPS];
  float *a = filled(m * k, 1), *b = filled(k * n, 2), *c = filled(m * n, 3);
  if (!a || !b || !c) {
    free(a); free(b); free(c);
    return luaL_error(L, "sgemm: out of memory");
  }
  for (int r = -1; r < reps; r++) {   /* r = -1 warms caches and BLAS threads */
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n,
                0.0f, c, (int)n);
    if (r >= 0) t[r] = now_seconds() - t0;
  }
  free(a); free(b); free(c);
  lua_pushnumber(L, median(t, reps));
  return 1;
}

/* The baseline a softplus kernel must beat: one libm call pair per element,
** kept scalar so it stands for the plain C loop anyone would write. */
__attribute__((noinline, optimize("no-tree-vectorize")))
static float softplus_libm(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = log1pf(expf(x[i]));
  return y[0] + y[n - 1];
}

/* softplus_libm(n, reps) -> median seconds for n elements. */
static int l_bench_softplus_libm(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  int reps = check_reps(L, 2);
  luaL_argcheck(L, n >= 1 && n <= ((lua_Integer)1 << 30), 1, "n must be in 1..2^30");
  double t[MAX_REPS];
  float *x = filled(n, 4), *y = filled(n, 5);
  if (!x || !y) {
    free(x); free(y);
    return luaL_error(L, "softplus_libm: out of memory");
  }
  volatile float sink = 0;   /* keeps the loop from being optimised away */
  for (int r = -1; r < reps; r++) {
    double t0 = now_seconds();
    sink += softplus_libm(x, y, n);
    if (r >= 0) t[r] = now_seconds() - t0;
  }
  (void)sink;
  free(x); free(y);
  lua_pushnumber(L, median(t, reps));
  return 1;
}

/* clock() -> monotonic seconds, the clock the floors are timed with. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, now_seconds());
  return 1;
}

static const luaL_Reg bench_funcs[] = {
  {"sgemm", l_bench_sgemm}, {"softplus_libm", l_bench_softplus_libm},
  {"clock", l_clock}, {NULL, NULL}
};

LUAMOD_API int luaopen_bbb_bench(lua_State *L) {
  luaL_newlib(L, bench_funcs);
  return 1;
}
