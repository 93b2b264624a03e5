/*
** vmath.h: float exp, log, log1p, softplus, sigmoid and tanh built from
** arithmetic, compares, selects and bit casts only. A libm call inside a loop
** stops GCC from vectorising it; these inline into plain `for` loops and
** vectorise at -O3 (-fno-math-errno, never -ffast-math: NaN and inf behave).
** Keep the loop body free of ?: around calls (`c ? bbb_expf(a) : b` does not
** if-convert when trapping math is on, GCC's default; CMakeLists passes
** -fno-trapping-math, but these loops must not depend on that flag): call
** unconditionally and pick with bbb_self.
**
** Cephes-style polynomials. Largest error against double libm, over every
** float input with a normal result (exhaustive, with FMA):
**   exp 1.01 ulp, log 0.83, log1p 0.90, tanh 1.46 (relative <= 1.6e-7)
**   sigmoid 2.40 ulp, softplus 2.80 (relative <= 2.3e-7: the 1-ulp error of
**   e^x carries into a result one binade lower)
** Subnormal results are within 0.75 ulp of the 2^-149 grid.
**
** Ranges: bbb_expf overflows to +inf above 88.72 and reaches the subnormals
** (exp(-103) = 1.4e-45); below -103.97 it is 0, so log of an exp result (or
** of softplus/sigmoid of x < -103.97) is -inf and callers must allow for it.
*/
#ifndef BBB_VMATH_H
#define BBB_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Every function here is forced inline: a call left in a loop stops it
** vectorising, and GCC's growth limits do refuse plain `inline` in the
** large kernels that instantiate a loop per prior and path. */
#if defined(__GNUC__)
#define BBB_VINLINE static inline __attribute__((always_inline))
#else
#define BBB_VINLINE static inline
#endif

/* Explicit fused multiply-add where the target has it, whatever the
** contraction setting (-std=c11 turns it off): Horner steps are both faster
** and tighter fused. */
#if defined(__FMA__)
#define BBB_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define BBB_FMAF(a, b, c) ((a) * (b) + (c))
#endif

BBB_VINLINE uint32_t bbb_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
BBB_VINLINE float bbb_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
BBB_VINLINE float bbb_absf(float x) { return bbb_u2f(bbb_f2u(x) & 0x7fffffffu); }

/* c ? a : b as bit masking. A plain ?: on a computed value lets GCC sink the
** computation into a branch, which it will not if-convert when trapping math
** is on (its default, off in our CMake build); masks keep everything
** unconditional whatever the flags. */
BBB_VINLINE float bbb_self(int c, float a, float b) {
  uint32_t m = 0u - (uint32_t)(c != 0);
  return bbb_u2f((bbb_f2u(a) & m) | (bbb_f2u(b) & ~m));
}

/* e^x = 2^n e^r with n = round(x / ln 2), |r| <= ln 2 / 2, for x already
** clamped to [-104, 89] (or NaN, which flows through). Returns e^r and
** stores n. */
BBB_VINLINE float bbb_expf_reduce(float x, int32_t *n) {
  const float magic = 12582912.0f;           /* 1.5 * 2^23: adding rounds to int */
  float t = BBB_FMAF(x, 1.44269504088896341f, magic);
  float fn = t - magic;
  float r = BBB_FMAF(fn, -0.693359375f, x);  /* Cody-Waite: ln 2 in two parts */
  r = BBB_FMAF(fn, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = BBB_FMAF(p, r, 1.3981999507e-3f);
  p = BBB_FMAF(p, r, 8.3334519073e-3f);
  p = BBB_FMAF(p, r, 4.1665795894e-2f);
  p = BBB_FMAF(p, r, 1.6666665459e-1f);
  p = BBB_FMAF(p, r, 5.0000001201e-1f);
  /* n sits in the low mantissa bits of t: read it there rather than convert
  ** fn, which would be undefined for NaN. */
  *n = (int32_t)(bbb_f2u(t) - 0x4B400000u);
  return BBB_FMAF(p, r * r, r) + 1.0f;
}

/* e^x. NaN propagates, exp(-inf) = 0, exp(x > 88.72) = +inf. */
BBB_VINLINE float bbb_expf(float x) {
  float xc = bbb_self(x > 89.0f, 89.0f, x);
  xc = bbb_self(xc < -104.0f, -104.0f, xc);
  int32_t n;
  float p = bbb_expf_reduce(xc, &n);
  /* 2^n in [2^-150, 2^128] as two normal factors: the product rounds once,
  ** so subnormal results are right, and n = 128 overflows to inf. */
  int32_t n1 = n >> 1, n2 = n - n1;
  float s1 = bbb_u2f((uint32_t)(n1 + 127) << 23);
  float s2 = bbb_u2f((uint32_t)(n2 + 127) << 23);
  return p * s1 * s2;
}

/* e^x for x <= 0 (or NaN) only, as in softplus, sigmoid and tanh: one clamp,
** and n <= 0 lets 2^n be built as 2^(n+64) * 2^-64 (still one rounding). */
BBB_VINLINE float bbb_expf_neg(float x) {
  int32_t n;
  float p = bbb_expf_reduce(bbb_self(x < -104.0f, -104.0f, x), &n);
  return p * bbb_u2f((uint32_t)(n + 64 + 127) << 23) * 0x1p-64f;
}

/* log(x) + k ln 2 + c for finite normal x > 0; bbb_logf adds the edge cases.
** k (a small integer) folds into the exponent, and c (a small correction) into
** the low-order sum, so neither costs accuracy. */
BBB_VINLINE float bbb_logf_core(float x, float k, float c) {
  /* Offset the bits so the mantissa lands in [sqrt(1/2), sqrt(2)): f = m - 1
  ** is then small on both sides of 1, where the polynomial is accurate. */
  uint32_t ix = bbb_f2u(x) + (0x3f800000u - 0x3f3504f3u);
  float e = (float)((int32_t)(ix >> 23) - 127) + k;
  float f = bbb_u2f((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  float z = f * f;
  float p = 7.0376836292e-2f;
  p = BBB_FMAF(p, f, -1.1514610310e-1f);
  p = BBB_FMAF(p, f, 1.1676998740e-1f);
  p = BBB_FMAF(p, f, -1.2420140846e-1f);
  p = BBB_FMAF(p, f, 1.4249322787e-1f);
  p = BBB_FMAF(p, f, -1.6668057665e-1f);
  p = BBB_FMAF(p, f, 2.0000714765e-1f);
  p = BBB_FMAF(p, f, -2.4999993993e-1f);
  p = BBB_FMAF(p, f, 3.3333331174e-1f);
  float y = p * f * z;
  y = BBB_FMAF(e, -2.12194440e-4f, y);       /* ln 2 = 0.693359375 - 2.12e-4 */
  y = BBB_FMAF(z, -0.5f, y) + c;
  return BBB_FMAF(e, 0.693359375f, f + y);
}

/* log x: subnormals handled, log 0 = -inf, log(x < 0) = NaN, log inf = inf. */
BBB_VINLINE float bbb_logf(float x) {
  int small = x < 1.17549435e-38f;           /* below FLT_MIN: scale by 2^23 */
  float xs = bbb_self(small, x * 8388608.0f, x);
  float r = bbb_logf_core(xs, bbb_self(small, -23.0f, 0.0f), 0.0f);
  r = bbb_self(x == INFINITY, x, r);
  r = bbb_self(x == 0.0f, -INFINITY, r);
  r = bbb_self(x < 0.0f, NAN, r);
  return bbb_self(x != x, x, r);
}

/* log(1 + u), accurate for tiny u. w = 1 + u is rounded; c = u - (w - 1)
** is that rounding error (exact for |u| < 2^24), and
** log(1 + u) = log(w) + c / w to within c^2: the correction restores the bits
** lost in forming w. */
BBB_VINLINE float bbb_log1pf(float u) {
  float w = 1.0f + u;
  float c = (u - (w - 1.0f)) / w;
  float r = bbb_logf_core(w, 0.0f, c);
  r = bbb_self(w == 1.0f, u, r);             /* also keeps log1p(-0) = -0 */
  r = bbb_self(w == INFINITY, w, r);
  r = bbb_self(w == 0.0f, -INFINITY, r);
  r = bbb_self(w < 0.0f, NAN, r);
  return bbb_self(u != u, u, r);
}

/* log(1 + t) for t in [0, 1] only (NaN passes), with no division:
** t + t^2 p(t), where 1 + t p(t) is a degree-9 fit of log1p(t) / t at
** Chebyshev nodes of [0, 1] (fit error 5e-9 relative). At most 1.38 ulp
** over every float of [0, 1] (exhaustive, with FMA). bbb_log1p_unit_q
** also gives the fit itself, 1 + t p(t) = log1p(t) / t, in *q (within
** 1.07 ulp over a sweep of [0, 1]). */
BBB_VINLINE float bbb_log1p_unit_q(float t, float *q) {
  float p = -3.1760569291e-03f;
  p = BBB_FMAF(p, t, 1.9542526862e-02f);
  p = BBB_FMAF(p, t, -5.6373612086e-02f);
  p = BBB_FMAF(p, t, 1.0543623720e-01f);
  p = BBB_FMAF(p, t, -1.5269667029e-01f);
  p = BBB_FMAF(p, t, 1.9663274241e-01f);
  p = BBB_FMAF(p, t, -2.4951616260e-01f);
  p = BBB_FMAF(p, t, 3.3329710499e-01f);
  p = BBB_FMAF(p, t, -4.9999892648e-01f);
  *q = BBB_FMAF(p, t, 1.0f);
  return BBB_FMAF(p * t, t, t);
}
BBB_VINLINE float bbb_log1p_unit(float t) {
  float q;
  return bbb_log1p_unit_q(t, &q);
}

/* log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in (0, 1]: no overflow for
** large x, and for very negative x the result is e^x to full relative
** accuracy until e^x itself underflows below ~-103.97. */
BBB_VINLINE float bbb_softplusf(float x) {
  float m = bbb_self(x > 0.0f, x, 0.0f);
  return m + bbb_log1p_unit(bbb_expf_neg(-bbb_absf(x)));
}

/* 1 / (1 + e^-x), written with e^-|x| so negative x keeps relative accuracy
** (sigmoid(-100) = 3.7e-44, not 0) and nothing overflows. */
BBB_VINLINE float bbb_sigmoidf(float x) {
  float e = bbb_expf_neg(-bbb_absf(x));
  float num = bbb_self(x < 0.0f, e, 1.0f);
  return num / (1.0f + e);
}

/* tanh: odd polynomial near 0 (keeps tanh(x) = x for tiny x), else
** 1 - 2t / (1 + t) with t = e^{-2|x|}, which saturates to 1 with no inf.
** Both on |x|, then x's sign bit, so tanh(-0) = -0. */
BBB_VINLINE float bbb_tanhf(float x) {
  float ax = bbb_absf(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = BBB_FMAF(p, z, 2.06390887954e-2f);
  p = BBB_FMAF(p, z, -5.37397155531e-2f);
  p = BBB_FMAF(p, z, 1.33314422036e-1f);
  p = BBB_FMAF(p, z, -3.33332819422e-1f);
  float small = BBB_FMAF(p * z, ax, ax);
  float t = bbb_expf_neg(-2.0f * ax);
  float big = 1.0f - 2.0f * t / (1.0f + t);
  float r = bbb_self(ax < 0.625f, small, big);
  return bbb_u2f(bbb_f2u(r) | (bbb_f2u(x) & 0x80000000u));
}

#endif
