/*
** test_gemm.c: the Haswell rounding of gemm.c.
**
** - "haswell" (the AVX2 kernel) gives the bits of "reference" (plain loops)
**   on every shape tried: all four transposes, beta 0, 1 and 0.5, k and n
**   past OpenBLAS's 320-wide blocks, zeros, -0, subnormals, infinities
**   and NaNs, one call (bbb_sgemm) and cut into tiles over threads (bbb_gemm).
** - Where OpenBLAS 0.3.21 runs its Haswell kernels (ctest sets
**   OPENBLAS_CORETYPE=Haswell; the CPU needs AVX2 and FMA), "haswell" gives
**   the bits of cblas_sgemm itself. Elsewhere that part says it is skipped.
** - Against products in double, at the extremes: within the bound of a
**   chain of k roundings (k u sum |a b|, u = 2^-24 per rounding, twice).
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);

static int failed, checks;
static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return state;
}
static double unit(void) { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
static int64_t upto(int64_t n) { return 1 + (int64_t)(unit() * (double)n); }

/* Entries of a few kinds: ordinary, zero, -0, subnormal, large, and (when
** special) infinities and NaNs. */
static float entry(int special) {
  double u = unit(), s = unit() < 0.5 ? -1.0 : 1.0;
  if (u < 0.30) return 0.0f;
  if (u < 0.33) return -0.0f;
  if (u < 0.36) return (float)(s * 1e-40 * (1 + unit()));
  if (u < 0.39) return (float)(s * 1e30 * unit());
  if (special && u < 0.395) return (float)(s * INFINITY);
  if (special && u < 0.40) return NAN;
  return (float)(s * (unit() * 4 - 2));
}

/* An entry of a mostly-zero operand (one-hot inputs, ReLU activations and
** their gradients): zero with probability 0.8, else entry(special). */
static float sparse_entry(int special) { return unit() < 0.8 ? 0.0f : entry(special); }

static int same(float x, float y) {
  return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

/* Entries of c1 and c2 that differ, NaNs counted equal. */
static int64_t differ(const float *c1, const float *c2, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; i++) d += !same(c1[i], c2[i]);
  return d;
}

static void check(int ok, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  float beta) {
  checks++;
  if (!ok) {
    failed++;
    printf("FAIL %s: ta=%d tb=%d m=%lld n=%lld k=%lld beta=%g\n", what, ta, tb, (long long)m,
           (long long)n, (long long)k, beta);
  }
}

typedef void (*gemm_fn)(int, int, int64_t, int64_t, int64_t, const float *, const float *, float,
                        float *);

/* c = op(a) op(b) + beta c0 by the given kind and function. */
static void run(int kind, gemm_fn f, int ta, int tb, int64_t m, int64_t n, int64_t k,
                const float *a, const float *b, float beta, const float *c0, float *c) {
  memcpy(c, c0, (size_t)(m * n) * sizeof(float));
  bbb_gemm_kind(kind);
  f(ta, tb, m, n, k, a, b, beta, c);
  bbb_gemm_kind(BBB_GEMM_OPENBLAS);
}

static void cblas_call(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                       const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n, beta,
              c, (int)n);
}

int main(void) {
  const char *core = openblas_get_corename(), *config = openblas_get_config();
  int vs_openblas = core && strcmp(core, "Haswell") == 0 && config && strstr(config, "0.3.21");
  printf("OpenBLAS %s, core %s: %s\n", config ? config : "?", core ? core : "?",
         vs_openblas ? "checking against cblas_sgemm too"
                     : "skipped: the check against cblas_sgemm (needs 0.3.21 on Haswell kernels)");
  /* the products of a bandit update (119-100-100-1 at batch 64), as
  ** ta, tb, m, n, k; after the random shapes, each with every beta, mostly
  ** zero op(a) and not */
  static const int64_t fixed[][5] = {
    { 0, 1, 64, 100, 119 }, { 0, 1, 64, 100, 100 }, { 0, 1, 64, 1, 100 }, { 0, 0, 64, 100, 1 },
    { 1, 0, 1, 100, 64 }, { 0, 0, 64, 100, 100 }, { 1, 0, 100, 100, 64 }, { 1, 0, 100, 119, 64 },
    { 0, 1, 2, 100, 119 }, { 1, 1, 37, 5, 333 }, { 0, 0, 13, 7, 1 }, { 1, 1, 9, 300, 1 } };
  const int nfixed = (int)(sizeof fixed / sizeof fixed[0]), nrandom = 260;
  int64_t shapes = 0, vs = 0;
  for (int t = 0; t < nrandom + 6 * nfixed; t++) {
    /* mostly small (the bandit's sizes), some past the 320-wide blocks; n
    ** below 8 and k = 1 take their own paths */
    int big = t % 5 == 4, f = t - nrandom;
    int64_t m = upto(big ? 90 : 70), n = t % 11 == 5 ? upto(7) : upto(big ? 700 : 140);
    int64_t k = t % 13 == 6 ? 1 : upto(big ? 800 : 140);
    int ta = (int)(next() & 1), tb = (int)(next() >> 1 & 1), special = t % 7 == 3;
    int sparse = t % 4 == 1 || t % 4 == 2;   /* op(a) mostly zero: the lists of nonzero k */
    float beta = t % 3 == 0 ? 0.0f : t % 3 == 1 ? 1.0f : 0.5f;
    if (f >= 0) {
      const int64_t *x = fixed[f / 6];
      ta = (int)x[0], tb = (int)x[1], m = x[2], n = x[3], k = x[4];
      beta = f % 3 == 0 ? 0.0f : f % 3 == 1 ? 1.0f : 0.5f, sparse = f % 6 < 3, special = f % 4 == 3;
    }
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c[4];
    for (int i = 0; i < 4; i++) c[i] = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m * k; i++) a[i] = sparse ? sparse_entry(special) : entry(special);
    for (int64_t i = 0; i < k * n; i++) b[i] = entry(special && t % 2);
    for (int64_t i = 0; i < m * n; i++) c0[i] = entry(0);
    gemm_fn one = bbb_sgemm, tiled = bbb_gemm;
    run(BBB_GEMM_HASWELL, one, ta, tb, m, n, k, a, b, beta, c0, c[0]);
    run(BBB_GEMM_REFERENCE, one, ta, tb, m, n, k, a, b, beta, c0, c[1]);
    check(differ(c[0], c[1], m * n) == 0, "one call: kernel = loops", ta, tb, m, n, k, beta);
    bbb_set_num_threads(t % 2 + 1);
    run(BBB_GEMM_HASWELL, tiled, ta, tb, m, n, k, a, b, beta, c0, c[2]);
    run(BBB_GEMM_REFERENCE, tiled, ta, tb, m, n, k, a, b, beta, c0, c[3]);
    check(differ(c[2], c[3], m * n) == 0, "tiles: kernel = loops", ta, tb, m, n, k, beta);
    if (vs_openblas) {
      run(BBB_GEMM_OPENBLAS, cblas_call, ta, tb, m, n, k, a, b, beta, c0, c[1]);
      check(differ(c[0], c[1], m * n) == 0, "one call: kernel = cblas_sgemm", ta, tb, m, n, k, beta);
      run(BBB_GEMM_OPENBLAS, tiled, ta, tb, m, n, k, a, b, beta, c0, c[3]);
      check(differ(c[2], c[3], m * n) == 0, "tiles: kernel = OpenBLAS", ta, tb, m, n, k, beta);
      vs++;
    }
    bbb_set_num_threads(1);
    /* against double, on finite data: |c - exact| <= 2 k u sum |a b| + |beta c0| u */
    if (!special) {
      int64_t bad = 0;
      for (int64_t r = 0; r < m; r++)
        for (int64_t col = 0; col < n; col++) {
          double s = (double)beta * c0[r * n + col], mag = fabs(s);
          for (int64_t l = 0; l < k; l++) {
            double x = ta ? a[l * m + r] : a[r * k + l], y = tb ? b[col * k + l] : b[l * n + col];
            s += x * y, mag += fabs(x * y);
          }
          double got = c[0][r * n + col];
          double bound = 2.0 * (double)(k + 2) * (ldexp(1.0, -24) * mag + ldexp(1.0, -149));
          if (mag < 3e38 && !(fabs(got - s) <= bound)) bad++;
        }
      check(bad == 0, "within the rounding bound of double", ta, tb, m, n, k, beta);
    }
    shapes++;
    free(a), free(b), free(c0);
    for (int i = 0; i < 4; i++) free(c[i]);
  }
  /* products that underflow to -0 on -0 starts: a split entry's empty odd
  ** chain turns them into +0 first (+0 + -0), a single one keeps -0 */
  for (int t = 0; t < 8; t++) {
    int64_t m = t == 7 ? 1 : 4 + 8 * (t % 4), n = 40, k = t % 2 ? 1 : 9;
    float beta = t < 4 ? 1.0f : 0.0f;
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c[2];
    for (int i = 0; i < 2; i++) c[i] = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m * k; i++) a[i] = i % 3 ? 1e-30f : 0.0f;
    for (int64_t i = 0; i < k * n; i++) b[i] = -1e-30f;
    for (int64_t i = 0; i < m * n; i++) c0[i] = -0.0f;
    run(BBB_GEMM_HASWELL, bbb_sgemm, 0, 0, m, n, k, a, b, beta, c0, c[0]);
    run(BBB_GEMM_REFERENCE, bbb_sgemm, 0, 0, m, n, k, a, b, beta, c0, c[1]);
    check(differ(c[0], c[1], m * n) == 0, "-0 from underflow: kernel = loops", 0, 0, m, n, k, beta);
    if (vs_openblas) {
      run(BBB_GEMM_OPENBLAS, cblas_call, 0, 0, m, n, k, a, b, beta, c0, c[1]);
      check(differ(c[0], c[1], m * n) == 0, "-0 from underflow: kernel = cblas_sgemm", 0, 0, m, n, k, beta);
    }
    free(a), free(b), free(c0), free(c[0]), free(c[1]);
  }
  printf("%lld shapes (%lld against cblas_sgemm), %d checks, %d failed\n", (long long)shapes,
         (long long)vs, checks, failed);
  return failed != 0;
}
