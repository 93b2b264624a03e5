/*
** optim.c: SGD (momentum, Nesterov), Adam and RMSprop as single passes.
** Weight decay is L2 added to the gradient, as in the classic forms.
*/
#include <math.h>

#include "optim.h"
#include "parallel.h"


typedef struct {
  bbb_float *p, *a, *b;
  const bbb_float *g;
  float gs, lr, c1, c2, eps, wd, bc1, bc2;
  int flag;
} upd_ctx;

static int check_same(const bbb_tensor *p, const bbb_tensor *t, const char *op, const char *what) {
  char s1[96], s2[96];
  if (t && !bbb_same_shape(p, t))
    return bbb_error(BBB_ESHAPE, "%s: %s %s does not match parameter %s", op, what,
                     bbb_shape_str(t, s1, sizeof s1), bbb_shape_str(p, s2, sizeof s2));
  return BBB_OK;
}

static double sq_chunk(const void *x, int64_t lo, int64_t hi) {
  const bbb_float *d = x;
  double s = 0;
  #pragma omp simd reduction(+:s)
  for (int64_t i = lo; i < hi; i++) s += (double)d[i] * d[i];
  return s;
}

double bbb_sqnorm(const bbb_tensor *t) {
  return bbb_parallel_sum(t->numel, sq_chunk, bbb_data(t));
}

static void sgd_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float d = u->g[i] * u->gs + u->wd * u->p[i];
    if (u->a) {
      float m = u->c1 * u->a[i] + d;
      u->a[i] = m;
      d = u->flag ? d + u->c1 * m : m;
    }
    u->p[i] -= u->lr * d;
  }
}

int bbb_sgd_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *buf, double gscale,
                   double lr, double momentum, int nesterov, double weight_decay) {
  int st = check_same(p, g, "sgd", "gradient");
  if (!st) st = check_same(p, buf, "sgd", "momentum buffer");
  if (st) return st;
  upd_ctx u = { bbb_data(p), buf && momentum != 0 ? bbb_data(buf) : NULL, NULL, bbb_data(g),
                (float)gscale, (float)lr, (float)momentum, 0, 0, (float)weight_decay, 0, 0, nesterov };
  bbb_parallel_for(p->numel, BBB_GRAIN_ELEM, sgd_range, &u);
  bbb_tensor_touch(p);
  return BBB_OK;
}

static void adam_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float d = u->g[i] * u->gs + u->wd * u->p[i];
    float m = u->c1 * u->a[i] + (1 - u->c1) * d;
    float v = u->c2 * u->b[i] + (1 - u->c2) * d * d;
    u->a[i] = m; u->b[i] = v;
    u->p[i] -= u->lr * (m * u->bc1) / (sqrtf(v * u->bc2) + u->eps);
  }
}

int bbb_adam_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *m, bbb_tensor *v,
                    double gscale, double lr, double beta1, double beta2, double eps,
                    double weight_decay, int64_t step) {
  int st = check_same(p, g, "adam", "gradient");
  if (!st) st = check_same(p, m, "adam", "first moment");
  if (!st) st = check_same(p, v, "adam", "second moment");
  if (st) return st;
  if (step < 1) return bbb_error(BBB_EARG, "adam: step must be >= 1, got %lld", (long long)step);
  upd_ctx u = { bbb_data(p), bbb_data(m), bbb_data(v), bbb_data(g), (float)gscale, (float)lr,
                (float)beta1, (float)beta2, (float)eps, (float)weight_decay,
                (float)(1 / (1 - pow(beta1, (double)step))), (float)(1 / (1 - pow(beta2, (double)step))), 0 };
  bbb_parallel_for(p->numel, BBB_GRAIN_ELEM, adam_range, &u);
  bbb_tensor_touch(p);
  return BBB_OK;
}

static void rmsprop_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float d = u->g[i] * u->gs + u->wd * u->p[i];
    float s = u->c1 * u->a[i] + (1 - u->c1) * d * d;
    u->a[i] = s;
    u->p[i] -= u->lr * d / (sqrtf(s) + u->eps);
  }
}

int bbb_rmsprop_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *sq, double gscale,
                       double lr, double alpha, double eps, double weight_decay) {
  int st = check_same(p, g, "rmsprop", "gradient");
  if (!st) st = check_same(p, sq, "rmsprop", "square average");
  if (st) return st;
  upd_ctx u = { bbb_data(p), bbb_data(sq), NULL, bbb_data(g), (float)gscale, (float)lr,
                (float)alpha, 0, (float)eps, (float)weight_decay, 0, 0, 0 };
  bbb_parallel_for(p->numel, BBB_GRAIN_ELEM, rmsprop_range, &u);
  bbb_tensor_touch(p);
  return BBB_OK;
}
