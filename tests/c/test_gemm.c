/*
** test_gemm.c: bbb_gemm and bbb_sgemm, the products on OpenBLAS.
**
** - bbb_gemm gives the same bits on 1 and 2 threads (its tiles depend on
**   the shape alone), on every shape tried: all four transposes, beta 0, 1
**   and 0.5, k and n past OpenBLAS's blocks, zeros, -0, subnormals,
**   infinities and NaNs.
** - Each tile is one cblas_sgemm call: a product no wider than one tile
**   has the bits of cblas_sgemm itself, and so does bbb_sgemm always.
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

/* c = op(a) op(b) + beta c0 by the given function on the given threads. */
static void run(gemm_fn f, int threads, int ta, int tb, int64_t m, int64_t n, int64_t k,
                const float *a, const float *b, float beta, const float *c0, float *c) {
  memcpy(c, c0, (size_t)(m * n) * sizeof(float));
  bbb_set_num_threads(threads);
  f(ta, tb, m, n, k, a, b, beta, c);
  bbb_set_num_threads(1);
}

static void cblas_call(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                       const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n, beta,
              c, (int)n);
}

/* Entries of c outside the rounding bound of the product in double, on
** finite data: |c - exact| <= 2 (k + 2) u sum |a b| + |beta c0| u. */
static int64_t off_double(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                          const float *b, float beta, const float *c0, const float *c) {
  int64_t bad = 0;
  for (int64_t r = 0; r < m; r++)
    for (int64_t col = 0; col < n; col++) {
      double s = (double)beta * c0[r * n + col], mag = fabs(s);
      for (int64_t l = 0; l < k; l++) {
        double x = ta ? a[l * m + r] : a[r * k + l], y = tb ? b[col * k + l] : b[l * n + col];
        s += x * y, mag += fabs(x * y);
      }
      double bound = 2.0 * (double)(k + 2) * (ldexp(1.0, -24) * mag + ldexp(1.0, -149));
      if (mag < 3e38 && !(fabs(c[r * n + col] - s) <= bound)) bad++;
    }
  return bad;
}

/* The checks of one shape on random operands. */
static void one_shape(int ta, int tb, int64_t m, int64_t n, int64_t k, float beta, int sparse,
                      int special) {
  float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
  float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c[4];
  for (int i = 0; i < 4; i++) c[i] = malloc(sizeof(float) * (size_t)(m * n));
  for (int64_t i = 0; i < m * k; i++) a[i] = sparse ? sparse_entry(special) : entry(special);
  for (int64_t i = 0; i < k * n; i++) b[i] = entry(special);
  for (int64_t i = 0; i < m * n; i++) c0[i] = entry(0);
  run(bbb_gemm, 1, ta, tb, m, n, k, a, b, beta, c0, c[0]);
  run(bbb_gemm, 2, ta, tb, m, n, k, a, b, beta, c0, c[1]);
  check(differ(c[0], c[1], m * n) == 0, "tiles: 1 thread = 2 threads", ta, tb, m, n, k, beta);
  run(bbb_sgemm, 2, ta, tb, m, n, k, a, b, beta, c0, c[2]);
  run(cblas_call, 1, ta, tb, m, n, k, a, b, beta, c0, c[3]);
  check(differ(c[2], c[3], m * n) == 0, "one call = cblas_sgemm", ta, tb, m, n, k, beta);
  if ((m >= n ? m : n) <= 32)   /* one tile (MIN_TILE) */
    check(differ(c[0], c[3], m * n) == 0, "one tile = cblas_sgemm", ta, tb, m, n, k, beta);
  if (!special)
    check(off_double(ta, tb, m, n, k, a, b, beta, c0, c[0]) == 0, "within the rounding bound of double",
          ta, tb, m, n, k, beta);
  free(a), free(b), free(c0);
  for (int i = 0; i < 4; i++) free(c[i]);
}

int main(void) {
  /* the products of a bandit update (119-100-100-1 at batch 64), as
  ** ta, tb, m, n, k; then random shapes, mostly small, some past
  ** OpenBLAS's blocks, some with k = 1 or n below 8 */
  static const int64_t fixed[][5] = {
    { 0, 1, 64, 100, 119 }, { 0, 1, 64, 100, 100 }, { 0, 1, 64, 1, 100 }, { 0, 0, 64, 100, 1 },
    { 1, 0, 1, 100, 64 }, { 0, 0, 64, 100, 100 }, { 1, 0, 100, 100, 64 }, { 1, 0, 100, 119, 64 },
    { 0, 1, 2, 100, 119 }, { 1, 1, 37, 5, 333 }, { 0, 0, 13, 7, 1 }, { 1, 1, 9, 300, 1 } };
  const int nfixed = (int)(sizeof fixed / sizeof fixed[0]), nrandom = 200;
  for (int f = 0; f < 6 * nfixed; f++) {
    const int64_t *x = fixed[f / 6];
    float beta = f % 3 == 0 ? 0.0f : f % 3 == 1 ? 1.0f : 0.5f;
    one_shape((int)x[0], (int)x[1], x[2], x[3], x[4], beta, f % 6 < 3, f % 4 == 3);
  }
  for (int t = 0; t < nrandom; t++) {
    int big = t % 5 == 4;
    int64_t m = upto(big ? 90 : 70), n = t % 11 == 5 ? upto(7) : upto(big ? 700 : 140);
    int64_t k = t % 13 == 6 ? 1 : upto(big ? 800 : 140);
    int ta = (int)(next() & 1), tb = (int)(next() >> 1 & 1);
    float beta = t % 3 == 0 ? 0.0f : t % 3 == 1 ? 1.0f : 0.5f;
    one_shape(ta, tb, m, n, k, beta, t % 4 == 1 || t % 4 == 2, t % 7 == 3);
  }
  printf("%d shapes, %d checks, %d failed\n", 6 * nfixed + nrandom, checks, failed);
  return failed != 0;
}
