/*
** test_vmath.c: the vectorisable float functions of vmath.h against
** double-precision libm, over a strided sweep of every float bit pattern
** (about 17M inputs per function) and over special values.
**
** Bounds enforced, for results in the normal float range:
**   exp, log, log1p   1.25 ulp   (exhaustive max 1.01, 0.83, 0.90)
**   log1p on [0, 1]   1.5 ulp    (bbb_log1p_unit; exhaustive max 1.38)
**   log1p(t) / t      1.5 ulp    (t in [0, 1], bbb_log1p_unit_q's q)
**   tanh              2 ulp      (exhaustive max 1.46)
**   sigmoid, softplus 3 ulp      (sweep max 2.40, 1.96: one ulp of e^x
**                                 inherited where the result sits a binade lower)
**   all               relative error 3e-7
** Subnormal results: within 1 ulp of the subnormal grid (2^-149).
** The sweep loops call the functions inline, so they exercise the same
** vectorised code the kernels get.
*/
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/vmath.h"

enum { F_EXP, F_LOG, F_LOG1P, F_SOFTPLUS, F_SIGMOID, F_TANH, F_LOG1P_UNIT, F_LOG1P_RATIO, NFUNC };
static const char *fname[NFUNC] = {"exp", "log", "log1p", "softplus", "sigmoid", "tanh", "log1p_unit",
                                   "log1p_ratio"};
static const double max_ulp[NFUNC] = {1.25, 1.25, 1.25, 3.0, 3.0, 2.0, 1.5, 1.5};

/* bbb_log1p_unit and its ratio are defined on [0, 1] (and pass NaN) only. */
static int in_domain(int f, float x) {
  if (f == F_LOG1P_UNIT || f == F_LOG1P_RATIO) return !(x < 0.0f || x > 1.0f);
  return 1;
}
static const double max_rel = 3e-7;

static int passed, failed;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (ok) passed++; else failed++;
}

static double reference(int f, double x) {
  switch (f) {
  case F_EXP: return exp(x);
  case F_LOG: return log(x);
  case F_LOG1P: case F_LOG1P_UNIT: return log1p(x);
  case F_LOG1P_RATIO: return x == 0 ? 1.0 : log1p(x) / x;
  case F_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  case F_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
  default: return tanh(x);
  }
}

/* One plain loop per function, so each is compiled (and vectorised) as a
** kernel would be. */
static void apply(int f, const float *x, float *y, int n) {
  switch (f) {
  case F_EXP: for (int i = 0; i < n; i++) y[i] = bbb_expf(x[i]); break;
  case F_LOG: for (int i = 0; i < n; i++) y[i] = bbb_logf(x[i]); break;
  case F_LOG1P: for (int i = 0; i < n; i++) y[i] = bbb_log1pf(x[i]); break;
  case F_SOFTPLUS: for (int i = 0; i < n; i++) y[i] = bbb_softplusf(x[i]); break;
  case F_SIGMOID: for (int i = 0; i < n; i++) y[i] = bbb_sigmoidf(x[i]); break;
  case F_LOG1P_UNIT: for (int i = 0; i < n; i++) y[i] = bbb_log1p_unit(x[i]); break;
  case F_LOG1P_RATIO:
    for (int i = 0; i < n; i++) (void)bbb_log1p_unit_q(x[i], &y[i]);
    break;
  default: for (int i = 0; i < n; i++) y[i] = bbb_tanhf(x[i]); break;
  }
}

/* Is y an acceptable float answer for the exact value r? Tracks the worst
** ulp and relative errors seen. */
typedef struct { double ulp, rel, sub_ulp; float worst_x; long bad; float bad_x; } errstat;

static void score(errstat *s, float x, float y, double r) {
  float rf = (float)r;
  if (isnan(r) || isinf(rf)) {             /* NaN and overflow must match exactly */
    if (isnan(r) ? !isnan(y) : y != rf) { s->bad++; s->bad_x = x; }
    return;
  }
  if (!isfinite(y)) { s->bad++; s->bad_x = x; return; }
  double ar = fabs(r), err = fabs((double)y - r);
  if (ar < FLT_MIN) {
    if (err / 0x1p-149 > s->sub_ulp) s->sub_ulp = err / 0x1p-149;
    return;
  }
  int e;
  frexp(ar, &e);
  double u = err / ldexp(1.0, e - 24);
  if (u > s->ulp) { s->ulp = u; s->worst_x = x; }
  if (err / ar > s->rel) s->rel = err / ar;
}

#define CHUNK 4096
#define STRIDE 257u   /* odd and prime: every exponent and many mantissas */

static void sweep(int f) {
  static float x[CHUNK], y[CHUNK];
  errstat s = {0};
  uint64_t bits = 0;
  while (bits < (1ull << 32)) {
    int n = 0;
    for (; n < CHUNK && bits < (1ull << 32); n++, bits += STRIDE) {
      uint32_t b = (uint32_t)bits;
      memcpy(&x[n], &b, 4);
    }
    apply(f, x, y, n);
    for (int i = 0; i < n; i++)
      if (in_domain(f, x[i])) score(&s, x[i], y[i], reference(f, x[i]));
  }
  char msg[256];
  snprintf(msg, sizeof msg, "%s sweep: max %.3f ulp (at %.9g, bound %.2f), rel %.3g, "
           "subnormal %.3f ulp, %ld special mismatches (e.g. %g)", fname[f], s.ulp,
           s.worst_x, max_ulp[f], s.rel, s.sub_ulp, s.bad, s.bad_x);
  check(s.ulp <= max_ulp[f] && s.rel <= max_rel && s.sub_ulp <= 1.0 && s.bad == 0, msg);
}

/* Special and boundary inputs: each result must be the correctly signed
** special value or within the sweep bounds. */
static void specials(int f) {
  static const float xs[] = {
    0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-10f, -1e-10f, 1e-30f, -1e-30f,
    0x1p-149f, -0x1p-149f, 1e-40f, FLT_MIN, FLT_MAX, -FLT_MAX, 88.7f, 88.72f, 88.73f,
    89.0f, -87.3f, -88.7f, -100.0f, -103.0f, -103.9f, -104.0f, -105.0f, 100.0f, -30.0f,
    30.0f, 1000.0f, -1000.0f, 0.625f, -0.625f, 9.0f, -9.0f, 20.0f, -20.0f, -0.5f,
    -0.999999f, 1e30f, INFINITY, -INFINITY, NAN};
  int n = (int)(sizeof xs / sizeof xs[0]);
  float y[64];
  errstat s = {0};
  apply(f, xs, y, n);
  for (int i = 0; i < n; i++)
    if (in_domain(f, xs[i])) score(&s, xs[i], y[i], reference(f, xs[i]));
  char msg[200];
  snprintf(msg, sizeof msg, "%s specials: max %.3f ulp, subnormal %.3f ulp, %ld mismatches (e.g. %g)",
           fname[f], s.ulp, s.sub_ulp, s.bad, s.bad_x);
  check(s.ulp <= max_ulp[f] && s.sub_ulp <= 1.0 && s.bad == 0, msg);
}

static float one(int f, float x) {
  float y;
  apply(f, &x, &y, 1);
  return y;
}

/* The exact values callers rely on. */
static void named_values(void) {
  check(one(F_EXP, 89.0f) == INFINITY && one(F_EXP, -INFINITY) == 0.0f
        && isnan(one(F_EXP, NAN)) && one(F_EXP, 0.0f) == 1.0f, "exp(89)=inf, exp(-inf)=0, exp(0)=1, NaN");
  check(one(F_EXP, -103.0f) > 0.0f && one(F_EXP, -104.0f) == 0.0f, "exp reaches the subnormals, 0 below -103.97");
  check(one(F_LOG, 0.0f) == -INFINITY && one(F_LOG, -0.0f) == -INFINITY && isnan(one(F_LOG, -1.0f))
        && one(F_LOG, INFINITY) == INFINITY && isnan(one(F_LOG, NAN)) && one(F_LOG, 1.0f) == 0.0f,
        "log: 0 -> -inf, <0 -> NaN, inf -> inf, NaN, log 1 = 0");
  check(fabsf(one(F_LOG, 0x1p-149f) + 103.27893f) < 1e-4f, "log of the smallest subnormal");
  check(one(F_LOG1P, 1e-10f) == 1e-10f && signbit(one(F_LOG1P, -0.0f)) && one(F_LOG1P, -1.0f) == -INFINITY
        && isnan(one(F_LOG1P, -2.0f)) && one(F_LOG1P, INFINITY) == INFINITY, "log1p: tiny, -0, -1, < -1, inf");
  check(one(F_SOFTPLUS, 1000.0f) == 1000.0f && one(F_SOFTPLUS, INFINITY) == INFINITY
        && one(F_SOFTPLUS, -INFINITY) == 0.0f && isnan(one(F_SOFTPLUS, NAN)), "softplus: 1000, +-inf, NaN");
  check(fabs(one(F_SOFTPLUS, -30.0f) / log1p(exp(-30.0)) - 1.0) < 3e-7, "softplus(-30) = 9.36e-14 to 3e-7 relative");
  check(one(F_SIGMOID, INFINITY) == 1.0f && one(F_SIGMOID, -INFINITY) == 0.0f && one(F_SIGMOID, 0.0f) == 0.5f
        && one(F_SIGMOID, -100.0f) > 0.0f && isnan(one(F_SIGMOID, NAN)), "sigmoid: +-inf, 0, -100 > 0, NaN");
  check(one(F_TANH, 1e-10f) == 1e-10f && signbit(one(F_TANH, -0.0f)) && one(F_TANH, 20.0f) == 1.0f
        && one(F_TANH, -INFINITY) == -1.0f && isnan(one(F_TANH, NAN)), "tanh: tiny, -0, saturates, NaN");
}

int main(void) {
  for (int f = 0; f < NFUNC; f++) sweep(f);
  for (int f = 0; f < NFUNC; f++) specials(f);
  named_values();
  printf("test_vmath: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
