/*
** test_rng.c: the Philox4x32-10 generator. Known-answer vectors from
** Random123, the exact stream layout (element 4j+k is word k of block
** counter+j), counter advance, thread-count independence, and the
** distributions of the uniform and normal fills.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/rng.h"

#define NBIG 1000000

static int passed, failed;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (ok) passed++; else failed++;
}

static int kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
               uint32_t e0, uint32_t e1, uint32_t e2, uint32_t e3) {
  uint32_t ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1}, out[4];
  bbb_philox4x32(ctr, key, out);
  return out[0] == e0 && out[1] == e1 && out[2] == e2 && out[3] == e3;
}

static void known_answers(void) {
  check(kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8),
        "philox4x32_10 KAT: zero counter, zero key");
  check(kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
            0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd),
        "philox4x32_10 KAT: all-ones counter and key");
  check(kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
            0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1),
        "philox4x32_10 KAT: pi digits");
}

/* Uniform(0, 1) element 4j+k must be the top 24 bits of word k of block
** counter+j under key (lo32(seed), hi32(seed)); start just below 2^32 so the
** counter carries into its high word. */
static void stream_layout(void) {
  bbb_rng g;
  uint64_t seed = 0x0123456789abcdefull, start = 0xfffffff0ull;
  bbb_rng_init(&g, seed);
  g.counter = start;
  float u[4 * 40];
  bbb_rng_uniform(&g, u, 4 * 40, 0.0f, 1.0f);
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  int ok = 1;
  for (uint64_t j = 0; j < 40; j++) {
    uint64_t c = start + j;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0}, w[4];
    bbb_philox4x32(ctr, key, w);
    for (int k = 0; k < 4; k++) ok &= u[4 * j + k] == (float)(w[k] >> 8) * 0x1p-24f;
  }
  check(ok && g.counter == start + 40, "stream layout: element 4j+k = word k of block counter+j, carry at 2^32");
}

/* Normals against Box-Muller in double on the same words: the float log,
** sqrt and sin/cos polynomials must not distort the values. */
static void box_muller_accuracy(void) {
  bbb_rng g;
  bbb_rng_init(&g, 5);
  float z[4 * 1024];
  bbb_rng_normal(&g, z, 4 * 1024, 0.0f, 1.0f);
  uint32_t key[2] = {5, 0};
  double worst = 0;
  for (uint32_t j = 0; j < 1024; j++) {
    uint32_t ctr[4] = {j, 0, 0, 0}, w[4];
    bbb_philox4x32(ctr, key, w);
    for (int h = 0; h < 2; h++) {
      double u1 = (double)(float)(int32_t)(w[2 * h] >> 1) * 0x1p-31 + 0x1p-32;
      double t = (double)(w[2 * h + 1] >> 8) * 0x1p-24;
      double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * t;
      double e0 = fabs(z[4 * j + 2 * h] - r * cos(a)), e1 = fabs(z[4 * j + 2 * h + 1] - r * sin(a));
      if (e0 > worst) worst = e0;
      if (e1 > worst) worst = e1;
    }
  }
  char msg[120];
  snprintf(msg, sizeof msg, "normal: Box-Muller within %.2g of double precision (bound 2e-6)", worst);
  check(worst < 2e-6, msg);
}

static void determinism(void) {
  static float a[4096], b[4096];
  bbb_rng g1, g2, g3;
  bbb_rng_init(&g1, 7);
  bbb_rng_init(&g2, 7);
  bbb_rng_init(&g3, 8);
  bbb_rng_normal(&g1, a, 4096, 0.0f, 1.0f);
  bbb_rng_normal(&g2, b, 4096, 0.0f, 1.0f);
  check(memcmp(a, b, sizeof a) == 0, "same seed, same numbers");
  bbb_rng_normal(&g3, b, 4096, 0.0f, 1.0f);
  int same = 0;
  for (int i = 0; i < 4096; i++) same += a[i] == b[i];
  check(same < 8, "different seeds, different numbers");
  bbb_rng_normal(&g1, b, 4096, 0.0f, 1.0f);
  same = 0;
  for (int i = 0; i < 4096; i++) same += a[i] == b[i];
  check(same < 8 && g1.counter == 2 * 1024, "consecutive draws differ; counter advances by ceil(n/4)");
}

/* draw(n1) then draw(n2) against one draw of the whole: contiguous when
** n1 % 4 == 0, otherwise the rest of the last block is skipped. */
static void split_draws(int64_t n1, int64_t n2, int normal) {
  int64_t skip = (4 - n1 % 4) % 4, total = n1 + skip + n2;
  float *whole = malloc((size_t)total * sizeof *whole);
  float *part = malloc((size_t)(n1 + n2) * sizeof *part);
  bbb_rng g;
  bbb_rng_init(&g, 99);
  if (normal) bbb_rng_normal(&g, whole, total, 0.0f, 1.0f);
  else bbb_rng_uniform(&g, whole, total, -1.0f, 1.0f);
  bbb_rng_init(&g, 99);
  if (normal) {
    bbb_rng_normal(&g, part, n1, 0.0f, 1.0f);
    bbb_rng_normal(&g, part + n1, n2, 0.0f, 1.0f);
  } else {
    bbb_rng_uniform(&g, part, n1, -1.0f, 1.0f);
    bbb_rng_uniform(&g, part + n1, n2, -1.0f, 1.0f);
  }
  int ok = memcmp(whole, part, (size_t)n1 * sizeof *part) == 0
           && memcmp(whole + n1 + skip, part + n1, (size_t)n2 * sizeof *part) == 0
           && g.counter == (uint64_t)((n1 + 3) / 4 + (n2 + 3) / 4);
  char msg[160];
  snprintf(msg, sizeof msg, "%s draw(%lld) then draw(%lld) = one draw, %lld element(s) skipped",
           normal ? "normal" : "uniform", (long long)n1, (long long)n2, (long long)skip);
  check(ok, msg);
  free(whole);
  free(part);
}

static void thread_independence(void) {
#ifdef _OPENMP
  float *a = malloc(NBIG * sizeof *a), *b = malloc(NBIG * sizeof *b);
  int saved = omp_get_max_threads(), ok = 1;
  bbb_rng g;
  for (int normal = 0; normal < 2; normal++) {
    omp_set_num_threads(1);
    bbb_rng_init(&g, 1234);
    if (normal) bbb_rng_normal(&g, a, NBIG - 3, 0.0f, 1.0f);
    else bbb_rng_uniform(&g, a, NBIG - 3, 0.0f, 1.0f);
    omp_set_num_threads(2);
    bbb_rng_init(&g, 1234);
    if (normal) bbb_rng_normal(&g, b, NBIG - 3, 0.0f, 1.0f);
    else bbb_rng_uniform(&g, b, NBIG - 3, 0.0f, 1.0f);
    ok &= memcmp(a, b, (NBIG - 3) * sizeof *a) == 0;
  }
  omp_set_num_threads(saved);
  check(ok, "1M uniforms and normals identical with 1 and 2 threads");
  free(a);
  free(b);
#else
  check(1, "thread independence: built without OpenMP, nothing to compare");
#endif
}

static int cmp_float(const void *p, const void *q) {
  float a = *(const float *)p, b = *(const float *)q;
  return (a > b) - (a < b);
}

static void normal_distribution(void) {
  float *z = malloc(NBIG * sizeof *z);
  bbb_rng g;
  bbb_rng_init(&g, 2024);
  bbb_rng_normal(&g, z, NBIG, 0.0f, 1.0f);
  double s = 0, s2 = 0;
  int finite = 1;
  for (int i = 0; i < NBIG; i++) { s += z[i]; s2 += (double)z[i] * z[i]; finite &= isfinite(z[i]); }
  double mean = s / NBIG, sd = sqrt(s2 / NBIG - mean * mean);
  char msg[160];
  snprintf(msg, sizeof msg, "normal: 1M samples, mean %.5f (|.| < 0.005), std %.5f (within 0.005 of 1)", mean, sd);
  check(finite && fabs(mean) < 0.005 && fabs(sd - 1.0) < 0.005, msg);
  /* Kolmogorov-Smirnov against Phi: 1.95 / sqrt(n) is the 0.1% critical value. */
  qsort(z, NBIG, sizeof *z, cmp_float);
  double d = 0;
  for (int i = 0; i < NBIG; i++) {
    double f = 0.5 * erfc(-z[i] / sqrt(2.0));
    double lo = f - (double)i / NBIG, hi = (double)(i + 1) / NBIG - f;
    if (lo > d) d = lo;
    if (hi > d) d = hi;
  }
  snprintf(msg, sizeof msg, "normal: KS distance %.5f < %.5f", d, 1.95 / sqrt(NBIG));
  check(d < 1.95 / sqrt(NBIG), msg);
  bbb_rng_normal(&g, z, NBIG, 3.0f, 0.5f);
  s = s2 = 0;
  for (int i = 0; i < NBIG; i++) { s += z[i]; s2 += (double)z[i] * z[i]; }
  mean = s / NBIG;
  sd = sqrt(s2 / NBIG - mean * mean);
  snprintf(msg, sizeof msg, "normal(3, 0.5): mean %.4f, std %.4f", mean, sd);
  check(fabs(mean - 3.0) < 0.003 && fabs(sd - 0.5) < 0.003, msg);
  free(z);
}

static void uniform_distribution(void) {
  float *u = malloc(NBIG * sizeof *u);
  bbb_rng g;
  bbb_rng_init(&g, 31337);
  bbb_rng_uniform(&g, u, NBIG, 0.0f, 1.0f);
  double s = 0, chi2 = 0;
  int inrange = 1, hist[20] = {0};
  for (int i = 0; i < NBIG; i++) {
    inrange &= u[i] >= 0.0f && u[i] < 1.0f;
    s += u[i];
    hist[(int)(u[i] * 20)]++;
  }
  for (int b = 0; b < 20; b++) chi2 += (hist[b] - NBIG / 20.0) * (hist[b] - NBIG / 20.0) / (NBIG / 20.0);
  char msg[160];
  /* chi^2 with 19 degrees of freedom: 43.8 is the 0.1% critical value */
  snprintf(msg, sizeof msg, "uniform: 1M in [0, 1), mean %.5f, 20-bin chi^2 %.1f < 43.8", s / NBIG, chi2);
  check(inrange && fabs(s / NBIG - 0.5) < 0.002 && chi2 < 43.8, msg);
  /* A one-ulp-wide range: lo + (hi - lo) u rounds to hi for half the draws. */
  float lo = 1.0f, hi = nextafterf(1.0f, 2.0f);
  bbb_rng_uniform(&g, u, 4096, lo, hi);
  int ok = 1;
  for (int i = 0; i < 4096; i++) ok &= u[i] >= lo && u[i] < hi;
  bbb_rng_uniform(&g, u, 4096, -3.0f, 5.0f);
  for (int i = 0; i < 4096; i++) ok &= u[i] >= -3.0f && u[i] < 5.0f;
  bbb_rng_uniform(&g, u, 4096, 2.0f, 2.0f);
  for (int i = 0; i < 4096; i++) ok &= u[i] == 2.0f;
  uint64_t before = g.counter;
  bbb_rng_uniform(&g, u, 0, 0.0f, 1.0f);
  free(u);
  check(ok && g.counter == before,
        "uniform: never reaches hi, even for a 1-ulp range; lo == hi gives lo; n = 0 draws nothing");
}

int main(void) {
  known_answers();
  stream_layout();
  box_muller_accuracy();
  determinism();
  split_draws(1000, 999, 1);
  split_draws(1001, 77, 1);
  split_draws(3, 5, 0);
  split_draws(70001, 130002, 1);
  thread_independence();
  normal_distribution();
  uniform_distribution();
  printf("test_rng: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
