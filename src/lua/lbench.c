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
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lua.h>
#include <lauxlib.h>

#include "engine/vmath.h"

#if defined(BBB_HAVE_SLEEF)
#include <immintrin.h>
#include <sleef.h>
#endif

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

/* bbb's thread count (bbb.core.get_num_threads(), when bbb is loaded). */
static int bbb_threads(lua_State *L) {
  int n = 1;
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "bbb.core") == LUA_TTABLE &&
      lua_getfield(L, -1, "get_num_threads") == LUA_TFUNCTION) {
    lua_call(L, 0, 1);
    n = (int)luaL_optinteger(L, -1, 1);
  }
  lua_settop(L, 0);
  return n < 1 ? 1 : n;
}

/* sgemm(m, n, k, ta, tb, reps) -> median seconds of one bare
** cblas_sgemm computing C (m, n) = op(A) op(B) on preallocated buffers,
** OpenBLAS threading it itself on bbb's thread count (bbb keeps OpenBLAS
** on one thread and threads a GEMM by its tiles). */
static int l_bench_sgemm(lua_State *L) {
  lua_Integer m = luaL_checkinteger(L, 1), n = luaL_checkinteger(L, 2), k = luaL_checkinteger(L, 3);
  int ta = lua_toboolean(L, 4), tb = lua_toboolean(L, 5), reps = check_reps(L, 6);
  int nt = bbb_threads(L);
  luaL_argcheck(L, m >= 1 && m <= 65536, 1, "m must be in 1..65536");
  luaL_argcheck(L, n >= 1 && n <= 65536, 2, "n must be in 1..65536");
  luaL_argcheck(L, k >= 1 && k <= 65536, 3, "k must be in 1..65536");
  double t[MAX_REPS];
  float *a = filled(m * k, 1), *b = filled(k * n, 2), *c = filled(m * n, 3);
  if (!a || !b || !c) {
    free(a); free(b); free(c);
    return luaL_error(L, "sgemm: out of memory");
  }
  omp_set_num_threads(nt);
  openblas_set_num_threads(nt);
  for (int r = -1; r < reps; r++) {   /* r = -1 warms caches and BLAS threads */
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n,
                0.0f, c, (int)n);
    if (r >= 0) t[r] = now_seconds() - t0;
  }
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
  free(a); free(b); free(c);
  lua_pushnumber(L, median(t, reps));
  return 1;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* iters rounds of 12 independent 8-wide fmas: enough chains to cover an
** fma's latency on two pipes, so the loop runs at the core's fma rate. */
__attribute__((target("avx2,fma"), noinline))
static float fma_loop(int64_t iters) {
  __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f), s[12];
  for (int i = 0; i < 12; i++) s[i] = _mm256_set1_ps((float)i);
  for (int64_t t = 0; t < iters; t++)
    for (int i = 0; i < 12; i++) s[i] = _mm256_fmadd_ps(s[i], a, b);
  __m256 sum = s[0];
  for (int i = 1; i < 12; i++) sum = _mm256_add_ps(sum, s[i]);
  return _mm256_cvtss_f32(sum);
}
#endif

/* fma_peak(reps) -> flops per second of one core at its 8-wide fma rate
** (AVX2 and FMA; nil without them): the ceiling of any float32 GEMM on
** one thread of this machine. */
static int l_bench_fma_peak(lua_State *L) {
  int reps = check_reps(L, 1);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    const int64_t iters = 2000000;   /* 384 Mflop, about 4 ms at 100 Gflop/s */
    double t[MAX_REPS];
    volatile float sink = 0;
    for (int r = -1; r < reps; r++) {
      double t0 = now_seconds();
      sink += fma_loop(iters);
      if (r >= 0) t[r] = now_seconds() - t0;
    }
    (void)sink;
    lua_pushnumber(L, (double)iters * 12 * 8 * 2 / median(t, reps));
    return 1;
  }
#endif
  lua_pushnil(L);
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

/* ---- our vector math (vmath.h) against SLEEF's ---- */

enum { VM_EXP, VM_LOG, VM_LOG1P, VM_TANH, VM_SOFTPLUS, VM_SIGMOID, VM_COUNT };
static const char *const vm_names[] = { "exp", "log", "log1p", "tanh", "softplus", "sigmoid", NULL };
enum { IMPL_OURS, IMPL_U10, IMPL_U35 };
static const char *const impl_names[] = { "ours", "sleef_u10", "sleef_u35", NULL };

static double vm_reference(int f, double x) {
  switch (f) {
  case VM_EXP: return exp(x);
  case VM_LOG: return log(x);
  case VM_LOG1P: return log1p(x);
  case VM_TANH: return tanh(x);
  case VM_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  default: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
  }
}

/* Ours: plain loops the compiler vectorises, as the kernels are written. */
static void vm_ours(int f, const float *x, float *y, int64_t n) {
  switch (f) {
  case VM_EXP: for (int64_t i = 0; i < n; i++) y[i] = bbb_expf(x[i]); break;
  case VM_LOG: for (int64_t i = 0; i < n; i++) y[i] = bbb_logf(x[i]); break;
  case VM_LOG1P: for (int64_t i = 0; i < n; i++) y[i] = bbb_log1pf(x[i]); break;
  case VM_TANH: for (int64_t i = 0; i < n; i++) y[i] = bbb_tanhf(x[i]); break;
  case VM_SOFTPLUS: for (int64_t i = 0; i < n; i++) y[i] = bbb_softplusf(x[i]); break;
  default: for (int64_t i = 0; i < n; i++) y[i] = bbb_sigmoidf(x[i]); break;
  }
}

#if defined(BBB_HAVE_SLEEF)
/* SLEEF's vector functions at this build's widest vector; softplus and
** sigmoid composed from them the way ours are (e^-|x|, then log1p or a
** quotient). u35 exists for log and tanh only: elsewhere it is u10. */
#if defined(__AVX512F__)
#define VW 16
typedef __m512 vf;
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define S(name, u) Sleef_##name##f16_##u
#define VABS(v) _mm512_abs_ps(v)
#define VNEG(v) _mm512_sub_ps(_mm512_setzero_ps(), v)
#define VMAX0(v) _mm512_max_ps(v, _mm512_setzero_ps())
#define VADD _mm512_add_ps
#define VDIV _mm512_div_ps
#define VONE _mm512_set1_ps(1.0f)
#define VSELNEG(x, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), b, a)
#elif defined(__AVX2__)
#define VW 8
typedef __m256 vf;
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define S(name, u) Sleef_##name##f8_##u
#define VABS(v) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)
#define VNEG(v) _mm256_sub_ps(_mm256_setzero_ps(), v)
#define VMAX0(v) _mm256_max_ps(v, _mm256_setzero_ps())
#define VADD _mm256_add_ps
#define VDIV _mm256_div_ps
#define VONE _mm256_set1_ps(1.0f)
#define VSELNEG(x, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ))
#endif
#endif

#if defined(VW)
#define HAVE_SLEEF_VECTORS 1
static vf sleef_one(int f, int u35, vf v) {
  switch (f) {
  case VM_EXP: return S(exp, u10)(v);
  case VM_LOG: return u35 ? S(log, u35)(v) : S(log, u10)(v);
  case VM_LOG1P: return S(log1p, u10)(v);
  case VM_TANH: return u35 ? S(tanh, u35)(v) : S(tanh, u10)(v);
  case VM_SOFTPLUS: return VADD(VMAX0(v), S(log1p, u10)(S(exp, u10)(VNEG(VABS(v)))));
  default: {
    vf e = S(exp, u10)(VNEG(VABS(v)));
    return VDIV(VSELNEG(v, e, VONE), VADD(VONE, e));
  }
  }
}

static void vm_sleef(int f, int u35, const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + VW <= n; i += VW) VSTORE(y + i, sleef_one(f, u35, VLOAD(x + i)));
  if (i < n) {   /* the tail through a padded vector */
    float bx[VW] = {0}, by[VW];
    for (int64_t k = i; k < n; k++) bx[k - i] = x[k];
    VSTORE(by, sleef_one(f, u35, VLOAD(bx)));
    for (int64_t k = i; k < n; k++) y[k] = by[k - i];
  }
}
#endif

static int vm_run(lua_State *L, int f, int impl, const float *x, float *y, int64_t n) {
  if (impl == IMPL_OURS) { vm_ours(f, x, y, n); return 1; }
#if defined(HAVE_SLEEF_VECTORS)
  vm_sleef(f, impl == IMPL_U35, x, y, n);
  return 1;
#else
  (void)L; (void)x; (void)y; (void)n;
  return 0;
#endif
}

/* The inputs of a function's sweep: where its result is a finite normal
** float (exp above -87.3, log of positive normals, log1p above -1). */
static int vm_in_domain(int f, float x) {
  if (!isfinite(x)) return 0;
  switch (f) {
  case VM_EXP: return x > -87.3f && x < 88.7f;
  case VM_LOG: return x >= 1.17549435e-38f;
  case VM_LOG1P: return x > -1.0f;
  case VM_SOFTPLUS: case VM_SIGMOID: return x > -87.0f;
  default: return 1;
  }
}

/* vmath(name, impl, n, reps) -> median seconds of one pass over n floats
** spread over the function's domain, on one thread from a buffer that stays
** in cache (the arithmetic, not memory, is timed); nil when impl is a SLEEF
** one and this build has no SLEEF. */
static int l_bench_vmath(lua_State *L) {
  int f = luaL_checkoption(L, 1, NULL, vm_names), impl = luaL_checkoption(L, 2, NULL, impl_names);
  lua_Integer n = luaL_checkinteger(L, 3);
  int reps = check_reps(L, 4);
  luaL_argcheck(L, n >= 1 && n <= ((lua_Integer)1 << 24), 3, "n must be in 1..2^24");
  float *x = filled(n, 6), *y = filled(n, 7);
  if (!x || !y) {
    free(x); free(y);
    return luaL_error(L, "vmath: out of memory");
  }
  for (int64_t i = 0; i < n; i++) {   /* [-8, 8) or (0, 16) */
    if (f == VM_LOG) x[i] += 8.0f + 1e-3f;
    if (f == VM_LOG1P) x[i] = (x[i] + 8.0f) / 16.0f * 4.0f - 0.99f;
  }
  double t[MAX_REPS];
  int ok = 1;
  for (int r = -1; r < reps && ok; r++) {
    double t0 = now_seconds();
    ok = vm_run(L, f, impl, x, y, n);
    if (r >= 0) t[r] = now_seconds() - t0;
  }
  volatile float sink = y[0];
  (void)sink;
  free(x); free(y);
  if (!ok) { lua_pushnil(L); return 1; }
  lua_pushnumber(L, median(t, reps));
  return 1;
}

/* vmath_ulp(name, impl) -> largest error in ulp, against double libm, over
** a strided sweep of every float bit pattern (stride 257: every binade and
** 16.7M inputs) within the function's domain, and the input where it
** occurs; nil without SLEEF. */
static int l_bench_vmath_ulp(lua_State *L) {
  int f = luaL_checkoption(L, 1, NULL, vm_names), impl = luaL_checkoption(L, 2, NULL, impl_names);
  enum { CH = 4096 };
  static float x[CH], y[CH];
  double worst = 0;
  float worst_x = 0;
  uint64_t bits = 0;
  while (bits < (1ull << 32)) {
    int n = 0;
    for (; n < CH && bits < (1ull << 32); bits += 257u) {
      uint32_t b = (uint32_t)bits;
      float v;
      memcpy(&v, &b, 4);
      if (vm_in_domain(f, v)) x[n++] = v;
    }
    if (!vm_run(L, f, impl, x, y, n)) { lua_pushnil(L); return 1; }
    for (int i = 0; i < n; i++) {
      double r = vm_reference(f, x[i]), ar = fabs(r);
      if (!(ar >= 1.17549435e-38 && ar <= 3.4028234e38)) continue;   /* normal results only */
      int e;
      frexp(ar, &e);
      double u = fabs((double)y[i] - r) / ldexp(1.0, e - 24);
      if (!(u <= worst)) { worst = u; worst_x = x[i]; }   /* NaN counts as the worst */
    }
  }
  lua_pushnumber(L, worst);
  lua_pushnumber(L, worst_x);
  return 2;
}

/* clock() -> monotonic seconds, the clock the floors are timed with. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, now_seconds());
  return 1;
}

char *openblas_get_corename(void);

/* blas() -> name of the kernels OpenBLAS runs, and OPENBLAS_CORETYPE or nil.
** The GEMM floor depends on them: OpenBLAS picks them at load time from
** that variable, or from its own table of CPUs when it is unset. */
static int l_bench_blas(lua_State *L) {
  const char *name = openblas_get_corename(), *env = getenv("OPENBLAS_CORETYPE");
  lua_pushstring(L, name ? name : "unknown");
  if (env) lua_pushstring(L, env); else lua_pushnil(L);
  return 2;
}

static const luaL_Reg bench_funcs[] = {
  {"sgemm", l_bench_sgemm}, {"fma_peak", l_bench_fma_peak}, {"softplus_libm", l_bench_softplus_libm},
  {"vmath", l_bench_vmath}, {"vmath_ulp", l_bench_vmath_ulp},
  {"clock", l_clock}, {"blas", l_bench_blas}, {NULL, NULL}
};

LUAMOD_API int luaopen_bbb_bench(lua_State *L) {
  luaL_newlib(L, bench_funcs);
#if defined(HAVE_SLEEF_VECTORS)
  lua_pushboolean(L, 1);
#else
  lua_pushboolean(L, 0);
#endif
  lua_setfield(L, -2, "has_sleef");
  return 1;
}
