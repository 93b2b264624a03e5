/*
** optim.c: SGD (momentum, Nesterov), Adam and RMSprop as single passes.
** Weight decay is L2 added to the gradient, as in the classic forms.
*/
#include <math.h>
#include <stdlib.h>

#include "bayes/optim.h"
#include "engine/parallel.h"
#include "engine/vmath.h"

/* Applied updates walk fixed chunks and keep each chunk's largest |value|
** written, as float bits: for non-negative floats the integer order is the
** float order, and NaN bits lie above inf's, so one integer max sees both. */
#define UCHUNK BBB_GRAIN_ELEM

typedef struct {
  bbb_float *p, *a, *b;
  const bbb_float *g;
  float gs, lr, c1, c2, eps, wd, bc1, bc2;
  int flag;
  int64_t n;
  uint32_t *mx;          /* 3 per chunk: p, a, b */
} upd_ctx;

static inline uint32_t absbits(float x) { return bbb_f2u(x) & 0x7fffffffu; }
static inline uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

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

/* Values below this stay finite through the few roundings of one update,
** with a wide margin (FLT_MAX is 3.4e38). */
#define SAFE 1e36

static unsigned version(const bbb_tensor *t) { return t ? t->storage->version : 0; }

/* 1 when bd describes the tensors as they are now (no write since). */
static int bound_current(const bbb_optim_bound *bd, const bbb_tensor *p, const bbb_tensor *a,
                         const bbb_tensor *b) {
  return bd && bd->known && bd->vp == version(p) && bd->va == version(a) && bd->vb == version(b);
}

/* The gradient term's bound, d = g gs + wd p: NaN (fails every test) when
** unknown. */
static double dbound(const bbb_optim_hyper *h, const bbb_optim_bound *bd) {
  double G = h->gmax;
  if (!(G >= 0 && G <= SAFE && bd->p <= SAFE && bd->a <= SAFE && bd->b <= SAFE)) return NAN;
  return G + h->weight_decay * bd->p;
}

/* Runs the update over the parameter and records its bound, or in a dry run
** counts the values the update would make non-finite (`count`, chunked so
** the count is exact whatever the thread count), unless `safe` says the
** bound already proves there are none. */
static int run_update(bbb_tensor *p, bbb_tensor *ta, bbb_tensor *tb, upd_ctx *u, bbb_range_fn chunks,
                      bbb_chunk_sum_fn count, int safe, bbb_optim_bound *bd, int dry,
                      int64_t *nonfinite) {
  if (dry) {
    double c = safe ? 0 : bbb_parallel_sum(p->numel, count, u);
    if (nonfinite) *nonfinite = (int64_t)c;
    return BBB_OK;
  }
  int64_t nch = (p->numel + UCHUNK - 1) / UCHUNK;
  uint32_t stack[3 * 64], *mx = nch <= 64 ? stack : malloc(3 * (size_t)nch * sizeof *mx);
  if (!mx) return bbb_error(BBB_EMEM, "optimizer update: out of memory");
  u->n = p->numel;
  u->mx = mx;
  bbb_parallel_for_whole(nch, BBB_GRAIN_CHUNKS, chunks, u);
  uint32_t m[3] = { 0, 0, 0 };
  for (int64_t k = 0; k < nch; k++)
    for (int j = 0; j < 3; j++) m[j] = umax(m[j], mx[3 * k + j]);
  if (mx != stack) free(mx);
  bbb_tensor_touch(p);
  if (ta) bbb_tensor_touch(ta);
  if (tb) bbb_tensor_touch(tb);
  if (bd) {
    bd->known = 1;
    bd->p = bbb_u2f(m[0]); bd->a = bbb_u2f(m[1]); bd->b = bbb_u2f(m[2]);
    bd->vp = version(p); bd->va = version(ta); bd->vb = version(tb);
  }
  if (nonfinite) *nonfinite = 0;
  return BBB_OK;
}

/* One chunk's bounds of a loop over the chunk's elements. */
#define CHUNK_LOOP(u, k, ...) do {                                          \
    int64_t a_ = (k) * UCHUNK, b_ = a_ + UCHUNK < (u)->n ? a_ + UCHUNK : (u)->n; \
    uint32_t mp = 0, ma = 0, mb = 0;                                         \
    _Pragma("omp simd reduction(max:mp, ma, mb)")                           \
    for (int64_t i = a_; i < b_; i++) __VA_ARGS__                               \
    (u)->mx[3 * (k)] = mp; (u)->mx[3 * (k) + 1] = ma; (u)->mx[3 * (k) + 2] = mb; \
  } while (0)

static int check_same(const bbb_tensor *p, const bbb_tensor *t, const char *op, const char *what) {
  char s1[96], s2[96];
  if (t && !bbb_same_shape(p, t))
    return bbb_error(BBB_ESHAPE, "%s: %s %s does not match parameter %s", op, what,
                     bbb_shape_str(t, s1, sizeof s1), bbb_shape_str(p, s2, sizeof s2));
  return BBB_OK;
}

double bbb_sqnorm_chunk(const bbb_float *d, int64_t lo, int64_t hi) {
  double s = 0;
  #pragma omp simd reduction(+:s)
  for (int64_t i = lo; i < hi; i++) s += (double)d[i] * d[i];
  return s;
}

static double sq_chunk(const void *x, int64_t lo, int64_t hi) { return bbb_sqnorm_chunk(x, lo, hi); }

static int whole(const bbb_tensor *t) { return t->offset == 0 && t->numel == t->storage->size; }

int bbb_sqnorm_known(const bbb_tensor *t) {
  const bbb_storage *s = t->storage;
  return whole(t) && s->sq_known && s->sq_version == s->version;
}

void bbb_sqnorm_keep(bbb_tensor *t, double sq) {
  if (!whole(t)) return;
  t->storage->sq_known = 1;
  t->storage->sq_version = t->storage->version;
  t->storage->sq = sq;
}

double bbb_sqnorm(const bbb_tensor *t) {
  if (bbb_sqnorm_known(t)) return t->storage->sq;
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

static void sgd_chunks(void *c, int64_t lo, int64_t hi) {
  upd_ctx l = *(upd_ctx *)c, *u = &l;   /* a local copy: its pointers are loop invariant */
  for (int64_t k = lo; k < hi; k++)
    CHUNK_LOOP(u, k, {
      float m = 0, np = sgd_new(u, i, &m);
      if (u->a) u->a[i] = m;
      u->p[i] = np;
      mp = umax(mp, absbits(np)); ma = umax(ma, absbits(m));
    });
}

/* |d| <= D; the buffer c1 m + d <= c1 M + D; the step d + c1 m' (Nesterov)
** or m' or d. */
static int sgd_safe(const bbb_optim_hyper *h, const bbb_optim_bound *bd, int has_buf) {
  double D = dbound(h, bd), mu = h->momentum;
  double Mn = has_buf ? mu * bd->a + D : 0;
  double step = !has_buf ? D : h->nesterov ? D + mu * Mn : Mn;
  return Mn <= SAFE && step <= SAFE && bd->p + h->lr * step <= SAFE;
}

/* 1 when x is NaN or infinite: x - x is 0 only for finite x. Unlike
** isfinite, the compare vectorises, so a dry run costs about one read of
** the operands rather than a scalar loop. */
static inline int nonfinite(float x) { return !(x - x == 0); }

static double sgd_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx l = *(const upd_ctx *)c, *u = &l;   /* loop-invariant pointers: no gathers */
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float m = 0, np = sgd_new(u, i, &m);
    n += nonfinite(np) | nonfinite(m);
  }
  return n;
}

int bbb_sgd_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *buf,
                   const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("sgd", h);
  if (!st) st = check_same(p, g, "sgd", "gradient");
  if (!st) st = check_same(p, buf, "sgd", "momentum buffer");
  if (st) return st;
  if (h->momentum == 0) buf = NULL;
  upd_ctx u = { bbb_data(p), buf ? bbb_data(buf) : NULL, NULL, bbb_data(g),
                (float)h->gscale, (float)h->lr, (float)h->momentum, 0, 0, (float)h->weight_decay,
                0, 0, h->nesterov, 0, NULL };
  int safe = dry && bound_current(bd, p, buf, NULL) && sgd_safe(h, bd, buf != NULL);
  return run_update(p, buf, NULL, &u, sgd_chunks, sgd_count, safe, bd, dry, nonfinite);
}

static inline float adam_new(const upd_ctx *u, int64_t i, float *m, float *v) {
  float d = u->g[i] * u->gs + u->wd * u->p[i];
  *m = u->c1 * u->a[i] + (1 - u->c1) * d;
  *v = u->c2 * u->b[i] + (1 - u->c2) * d * d;
  return u->p[i] - u->lr * (*m * u->bc1) / (sqrtf(*v * u->bc2) + u->eps);
}

static void adam_chunks(void *c, int64_t lo, int64_t hi) {
  upd_ctx l = *(upd_ctx *)c, *u = &l;   /* a local copy: its pointers are loop invariant */
  for (int64_t k = lo; k < hi; k++)
    CHUNK_LOOP(u, k, {
      float m, v, np = adam_new(u, i, &m, &v);
      u->a[i] = m; u->b[i] = v;
      u->p[i] = np;
      mp = umax(mp, absbits(np)); ma = umax(ma, absbits(m)); mb = umax(mb, absbits(v));
    });
}

/* m' and v' are convex mixtures: |m'| <= max(M, D), v' <= max(V, D^2); the
** step is at most lr bc1 |m'| / eps, as sqrt(bc2 v') >= 0. */
static int adam_safe(const bbb_optim_hyper *h, const bbb_optim_bound *bd, double bc1, double bc2) {
  double D = dbound(h, bd);
  double Mn = fmax(bd->a, D) * bc1, Vn = fmax(bd->b, D * D) * bc2, step = h->lr * Mn / h->eps;
  return D * D <= SAFE && Mn <= SAFE && Vn <= SAFE && step <= SAFE && bd->p + step <= SAFE;
}

static double adam_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx l = *(const upd_ctx *)c, *u = &l;   /* loop-invariant pointers: no gathers */
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float m, v, np = adam_new(u, i, &m, &v);
    n += nonfinite(np) | nonfinite(m) | nonfinite(v);
  }
  return n;
}

int bbb_adam_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *m, bbb_tensor *v,
                    const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("adam", h);
  if (!st) st = check_same(p, g, "adam", "gradient");
  if (!st) st = check_same(p, m, "adam", "first moment");
  if (!st) st = check_same(p, v, "adam", "second moment");
  if (st) return st;
  double s = (double)h->step, bc1 = 1 / (1 - pow(h->beta1, s)), bc2 = 1 / (1 - pow(h->beta2, s));
  upd_ctx u = { bbb_data(p), bbb_data(m), bbb_data(v), bbb_data(g), (float)h->gscale, (float)h->lr,
                (float)h->beta1, (float)h->beta2, (float)h->eps, (float)h->weight_decay,
                (float)bc1, (float)bc2, 0, 0, NULL };
  int safe = dry && bound_current(bd, p, m, v) && adam_safe(h, bd, bc1, bc2);
  return run_update(p, m, v, &u, adam_chunks, adam_count, safe, bd, dry, nonfinite);
}

static inline float rmsprop_new(const upd_ctx *u, int64_t i, float *s) {
  float d = u->g[i] * u->gs + u->wd * u->p[i];
  *s = u->c1 * u->a[i] + (1 - u->c1) * d * d;
  return u->p[i] - u->lr * d / (sqrtf(*s) + u->eps);
}

static void rmsprop_chunks(void *c, int64_t lo, int64_t hi) {
  upd_ctx l = *(upd_ctx *)c, *u = &l;   /* a local copy: its pointers are loop invariant */
  for (int64_t k = lo; k < hi; k++)
    CHUNK_LOOP(u, k, {
      float s, np = rmsprop_new(u, i, &s);
      u->a[i] = s;
      u->p[i] = np;
      mp = umax(mp, absbits(np)); ma = umax(ma, absbits(s));
    });
}

/* s' <= max(S, D^2); the step is at most lr D / eps. */
static int rmsprop_safe(const bbb_optim_hyper *h, const bbb_optim_bound *bd) {
  double D = dbound(h, bd), step = h->lr * D / h->eps;
  return D * D <= SAFE && step <= SAFE && bd->p + step <= SAFE;
}

static double rmsprop_count(const void *c, int64_t lo, int64_t hi) {
  const upd_ctx l = *(const upd_ctx *)c, *u = &l;   /* loop-invariant pointers: no gathers */
  int n = 0;
  #pragma omp simd reduction(+:n)
  for (int64_t i = lo; i < hi; i++) {
    float s, np = rmsprop_new(u, i, &s);
    n += nonfinite(np) | nonfinite(s);
  }
  return n;
}

int bbb_rmsprop_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *sq,
                       const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite) {
  int st = bbb_optim_check("rmsprop", h);
  if (!st) st = check_same(p, g, "rmsprop", "gradient");
  if (!st) st = check_same(p, sq, "rmsprop", "square average");
  if (st) return st;
  upd_ctx u = { bbb_data(p), bbb_data(sq), NULL, bbb_data(g), (float)h->gscale, (float)h->lr,
                (float)h->alpha, 0, (float)h->eps, (float)h->weight_decay, 0, 0, 0, 0, NULL };
  int safe = dry && bound_current(bd, p, sq, NULL) && rmsprop_safe(h, bd);
  return run_update(p, sq, NULL, &u, rmsprop_chunks, rmsprop_count, safe, bd, dry, nonfinite);
}
