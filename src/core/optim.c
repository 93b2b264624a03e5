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

static int bad_real(const char *kind, const char *name, double v, const char *need) {
  return bbb_error(BBB_EARG, "%s: %s must be %s, got %g", kind, name, need, v);
}

int bbb_optim_check(const char *kind, const bbb_optim_hyper *h) {
  if (!(isfinite(h->lr) && h->lr >= 0)) return bad_real(kind, "lr", h->lr, "finite and >= 0");
  if (!(isfinite(h->gscale) && h->gscale > 0)) return bad_real(kind, "gradient scale", h->gscale, "finite and > 0");
  if (!(isfinite(h->weight_decay) && h->weight_decay >= 0))
    return bad_real(kind, "weight_decay", h->weight_decay, "finite and >= 0");
  if (kind[0] == 's') {
    if (!(isfinite(h->momentum) && h->momentum >= 0)) return bad_real(kind, "momentum", h->momentum, "finite and >= 0");
    return BBB_OK;
  }
  if (!(isfinite(h->eps) && h->eps > 0)) return bad_real(kind, "eps", h->eps, "finite and > 0");
  if (kind[0] == 'a') {
    if (!(h->beta1 >= 0 && h->beta1 < 1)) return bad_real(kind, "beta1", h->beta1, "in [0, 1)");
    if (!(h->beta2 >= 0 && h->beta2 < 1)) return bad_real(kind, "beta2", h->beta2, "in [0, 1)");
    if (h->step < 1) return bbb_error(BBB_EARG, "%s: step must be >= 1, got %lld", kind, (long long)h->step);
  } else if (!(h->alpha >= 0 && h->alpha < 1)) {
    return bad_real(kind, "alpha", h->alpha, "in [0, 1)");
  }
  return BBB_OK;
}

/* Runs `range` over the parameter, or in a dry run counts the values the
** update would make non-finite (`count`, chunked so the count is exact
** whatever the thread count). */
static void run_update(bbb_tensor *p, upd_ctx *u, bbb_range_fn range, bbb_chunk_sum_fn count,
                       int dry, int64_t *nonfinite) {
  if (dry) {
    double c = bbb_parallel_sum(p->numel, count, u);
    if (nonfinite) *nonfinite = (int64_t)c;
    return;
  }
  bbb_parallel_for(p->numel, BBB_GRAIN_ELEM, range, u);
  bbb_tensor_touch(p);
  if (nonfinite) *nonfinite = 0;
}

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

/* Each kind's step for one element, shared by the update and its dry run. */
static inline float sgd_new(const upd_ctx *u, int64_t i, float *m) {
  float d = u->g[i] * u->gs + u->wd * u->p[i];
  if (u->a) {
    *m = u->c1 * u->a[i] + d;
    d = u->flag ? d + u->c1 * *m : *m;
  }
  return u->p[i] - u->lr * d;
}

static void sgd_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float m = 0, np = sgd_new(u, i, &m);
    if (u->a) u->a[i] = m;
    u->p[i] = np;
  }
}

/* 1 when x is NaN or infinite: x - x is 0 only for finite x. Unlike
** isfinite, the compare vectorises, so a dry run costs about one read of
** the operands rather than a scalar loop. */
static inline int nonfinite(float x) { return !(x - x == 0); }

static double sgd_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx *u = c;
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float m = 0, np = sgd_new(u, i, &m);
    n += nonfinite(np) | nonfinite(m);
  }
  return n;
}

int bbb_sgd_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *buf,
                   const bbb_optim_hyper *h, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("sgd", h);
  if (!st) st = check_same(p, g, "sgd", "gradient");
  if (!st) st = check_same(p, buf, "sgd", "momentum buffer");
  if (st) return st;
  upd_ctx u = { bbb_data(p), buf && h->momentum != 0 ? bbb_data(buf) : NULL, NULL, bbb_data(g),
                (float)h->gscale, (float)h->lr, (float)h->momentum, 0, 0, (float)h->weight_decay,
                0, 0, h->nesterov };
  run_update(p, &u, sgd_range, sgd_count, dry, nonfinite);
  return BBB_OK;
}

static inline float adam_new(const upd_ctx *u, int64_t i, float *m, float *v) {
  float d = u->g[i] * u->gs + u->wd * u->p[i];
  *m = u->c1 * u->a[i] + (1 - u->c1) * d;
  *v = u->c2 * u->b[i] + (1 - u->c2) * d * d;
  return u->p[i] - u->lr * (*m * u->bc1) / (sqrtf(*v * u->bc2) + u->eps);
}

static void adam_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float m, v, np = adam_new(u, i, &m, &v);
    u->a[i] = m; u->b[i] = v;
    u->p[i] = np;
  }
}

static double adam_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx *u = c;
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float m, v, np = adam_new(u, i, &m, &v);
    n += nonfinite(np) | nonfinite(m) | (v != v);
  }
  return n;
}

int bbb_adam_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *m, bbb_tensor *v,
                    const bbb_optim_hyper *h, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("adam", h);
  if (!st) st = check_same(p, g, "adam", "gradient");
  if (!st) st = check_same(p, m, "adam", "first moment");
  if (!st) st = check_same(p, v, "adam", "second moment");
  if (st) return st;
  double s = (double)h->step;
  upd_ctx u = { bbb_data(p), bbb_data(m), bbb_data(v), bbb_data(g), (float)h->gscale, (float)h->lr,
                (float)h->beta1, (float)h->beta2, (float)h->eps, (float)h->weight_decay,
                (float)(1 / (1 - pow(h->beta1, s))), (float)(1 / (1 - pow(h->beta2, s))), 0 };
  run_update(p, &u, adam_range, adam_count, dry, nonfinite);
  return BBB_OK;
}

static inline float rmsprop_new(const upd_ctx *u, int64_t i, float *s) {
  float d = u->g[i] * u->gs + u->wd * u->p[i];
  *s = u->c1 * u->a[i] + (1 - u->c1) * d * d;
  return u->p[i] - u->lr * d / (sqrtf(*s) + u->eps);
}

static void rmsprop_range(void *c, int64_t lo, int64_t hi) {
  upd_ctx *u = c;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float s, np = rmsprop_new(u, i, &s);
    u->a[i] = s;
    u->p[i] = np;
  }
}

static double rmsprop_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx *u = c;
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float s, np = rmsprop_new(u, i, &s);
    n += nonfinite(np) | (s != s);
  }
  return n;
}

int bbb_rmsprop_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *sq,
                       const bbb_optim_hyper *h, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("rmsprop", h);
  if (!st) st = check_same(p, g, "rmsprop", "gradient");
  if (!st) st = check_same(p, sq, "rmsprop", "square average");
  if (st) return st;
  upd_ctx u = { bbb_data(p), bbb_data(sq), NULL, bbb_data(g), (float)h->gscale, (float)h->lr,
                (float)h->alpha, 0, (float)h->eps, (float)h->weight_decay, 0, 0, 0 };
  run_update(p, &u, rmsprop_range, rmsprop_count, dry, nonfinite);
  return BBB_OK;
}
