/*
** bayes.c: fused sampling of Gaussian weights with the complexity term,
** and the C priors. All densities are evaluated in log space: the scale
** mixture with sigma2 = e^-8 stays finite for any finite weight.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "bayes/bayes.h"
#include "bayes/optim.h"
#include "engine/parallel.h"
#include "engine/vmath.h"

#define HALF_LOG_2PI 0.91893853320467274178

/* Per-element constants of a prior, in float for the vector loops, which
** each kind's name_consts fills for its own name_logp and name_dlogp (the
** comments give the Gaussian kinds' use); and off, the part of log p(w)
** that is the same for every w, added once per call in double. */
typedef struct {
  int kind;
  float c1, c2;         /* log weight - log sigma (- log 2 for Laplace) */
  float h1, h2;         /* 1 / (2 sigma^2), or 1 / b for Laplace */
  float p1, p2;         /* 1 / sigma^2 */
  double off;           /* -0.5 log 2 pi for the Gaussian kinds */
} prior_k;

/* The loops take the prior kind as a constant (always inlined into a switch)
** so the compiler drops the dispatch and vectorises them. */
#define INLINE static inline __attribute__((always_inline))

/* Sums of logs as logs of products. Over a block of PBLOCK weights the
** factors log1p(t) / t of log sigma (each in [log 2, 1]) and 3/4 (1 + t) of
** the mixture's log p (in [3/4, 3/2]) multiply to a normal float
** (0.69^192 = e^-70, 1.5^192 = e^78); the blocks' products gather in a
** double whose exponent is taken out as it goes, and one log per chunk
** stands for a polynomial per weight. Each factor is within an ulp or two
** of its value, so the log of the product is as close as the sum of the
** logs was. A NaN factor makes the result NaN. */
#define PBLOCK 192
#define LN2 0.69314718055994530942
#define LOG_4_3 0.28768207245178092744

typedef struct { double m; int64_t e; int bad; } logprod;

static void logprod_mul(logprod *lp, float x) {
  double m = lp->m * (double)x;
  uint64_t b;
  memcpy(&b, &m, sizeof b);
  int64_t ex = (int64_t)((b >> 52) & 0x7ff);
  if (ex == 0 || ex == 0x7ff) { lp->bad = 1; return; }   /* NaN, or a factor out of range */
  lp->e += ex - 1023;
  b = (b & ~(0x7ffULL << 52)) | (1023ULL << 52);
  memcpy(&lp->m, &b, sizeof b);
}

static double logprod_log(const logprod *lp) {
  return lp->bad ? NAN : log(lp->m) + (double)lp->e * LN2;
}

/* One simd loop per block of [a, b): the body adds to the float s1 and
** multiplies the float pr; the blocks' sums gather in lin (a double) and
** their products in lp. */
#define BLOCK_LOOP(a, b, lin, lp, ...) do {                                  \
    for (int64_t c_ = (a); c_ < (b); c_ += PBLOCK) {                         \
      int64_t d_ = c_ + PBLOCK < (b) ? c_ + PBLOCK : (b);                    \
      float s1 = 0, pr = 1;                                                  \
      _Pragma("omp simd reduction(+:s1) reduction(*:pr)")                   \
      for (int64_t i = c_; i < d_; i++) __VA_ARGS__                          \
      (lin) += s1;                                                           \
      logprod_mul(&(lp), pr);                                                \
    }                                                                        \
  } while (0)

/* Fixed chunks, so partial sums (and so the results) do not depend on the
** thread count. */
#define CHUNK BBB_BAYES_CHUNK
#define MAXCHUNKS 4096

/* What a bayes_sample or prior_log_prob node saves: the prior, and (sample
** only) the weight of the complexity term that kl_backward hands over. */
typedef struct { bbb_prior prior; double kl_grad; int out; } prior_saved;

typedef struct {
  prior_k k;
  const bbb_float *mu, *rho, *eps, *gw;
  bbb_float *w, *gmu, *grho;
  float gkl;
  int64_t n;
  double *logq, *logp;
  int fresh;            /* backward: gmu and grho are new, write them */
  bbb_float *tm;        /* a kind that keeps: its float per weight (the mixture's signed e^-|a1 - a2|) */
  double *sq;           /* backward by chunks: per chunk, sums of squares of gmu then grho */
  int64_t nch;
  bbb_float *o;         /* BBB_SAMPLE_VAR / _DELTA: the output (w goes to a chunk's scratch) */
  int out;              /* bbb_sample_out */
} fused_ctx;

/* ---- The priors of BBB_PRIORS (bayes.h). Each defines, with its name as
** the stem: name_consts (prior_k from the parameters, once per call),
** name_logp (log p(w)) and name_dlogp (d log p / d w), inlined into the
** loops; a prior with keeps = 1 also defines name_logp_sum (log p summed
** over a chunk of the sample pass, storing its float per weight in u->tm
** when keep is 1) and name_dlogp_kept (d log p / d w from that float). ---- */

/* N(0, sigma^2) */
static void gaussian_consts(prior_k *k, const double *par) {
  double s1 = par[0];
  k->c1 = (float)(-log(s1)); k->h1 = (float)(0.5 / (s1 * s1)); k->p1 = (float)(1 / (s1 * s1));
  k->off = -HALF_LOG_2PI;
}

INLINE float gaussian_logp(const prior_k *k, float w) { return k->c1 - w * w * k->h1; }

INLINE float gaussian_dlogp(const prior_k *k, float w) { return -w * k->p1; }

/* pi N(0, sigma1^2) + (1 - pi) N(0, sigma2^2) */
static void mixture_consts(prior_k *k, const double *par) {
  double pi = par[0], s1 = par[1], s2 = par[2];
  k->c1 = (float)(log(pi) - log(s1)); k->h1 = (float)(0.5 / (s1 * s1)); k->p1 = (float)(1 / (s1 * s1));
  k->c2 = (float)(log1p(-pi) - log(s2)); k->h2 = (float)(0.5 / (s2 * s2)); k->p2 = (float)(1 / (s2 * s2));
  k->off = -HALF_LOG_2PI;
}

/* The mixture's log p(w) is m + log1p(t): returns m, stores t = e^-|a1 - a2|
** and, in ts, t with the sign of a1 - a2. |a1 - a2| is clamped at 80: beyond
** it t adds less than 1e-34 to m, and the clamp keeps e^-|x| out of the
** subnormals, which cost a microcode assist per element. */
INLINE float mixture_parts(const prior_k *k, float w, float *t, float *ts) {
  float w2 = w * w, a1 = k->c1 - w2 * k->h1, a2 = k->c2 - w2 * k->h2;
  float x = a1 - a2, m = bbb_self(a1 > a2, a1, a2), d = -bbb_absf(x);
  d = bbb_self(d < -80.0f, -80.0f, d);
  *t = bbb_expf_neg(d);
  *ts = bbb_self(x >= 0.0f, *t, -*t);
  return m;
}

/* The mixture's d log p / d w from mixture_parts' signed t. Responsibilities
** r1 = sigmoid(x) (wide) and r2 = sigmoid(-x) (narrow), x = a1 - a2, both
** from t = e^-|x|: the small one is t / (1 + t) directly, never 1 - (the
** large one), which cancels in float where the narrow one falls through
** 1e-5..1e-9 and is then multiplied by the huge 1/sigma2^2. */
INLINE float mixture_dlogp_kept(const prior_k *k, float w, float ts) {
  float t = bbb_absf(ts), big = 1.0f / (1.0f + t), small = t * big;
  float r1 = bbb_self(ts >= 0.0f, big, small), r2 = bbb_self(ts >= 0.0f, small, big);
  return -w * (r1 * k->p1 + r2 * k->p2);
}

INLINE float mixture_logp(const prior_k *k, float w) {
  float t, ts;
  return mixture_parts(k, w, &t, &ts) + bbb_log1p_unit(t);
}

INLINE float mixture_dlogp(const prior_k *k, float w) {
  float t, ts;
  mixture_parts(k, w, &t, &ts);
  return mixture_dlogp_kept(k, w, ts);
}

/* The mixture's log p summed over the chunk: m per weight, log1p(t) as
** the log of a product; keep: the signed t stored for the backward pass. */
INLINE double mixture_logp_sum(int keep, fused_ctx *u, int64_t a, int64_t b) {
  const bbb_float *wv = u->w;
  bbb_float *tm = u->tm;
  prior_k k = u->k;
  logprod lp = { 1.0, 0, 0 };
  double lin = 0;
  BLOCK_LOOP(a, b, lin, lp, {
    float t, ts;
    s1 += mixture_parts(&k, wv[i], &t, &ts);
    if (keep) tm[i] = ts;
    pr *= BBB_FMAF(0.75f, t, 0.75f);
  });
  return lin + logprod_log(&lp) + (double)(b - a) * LOG_4_3;
}

/* Laplace(0, b): no -0.5 log 2 pi, its log 2 b is in c1. */
static void laplace_consts(prior_k *k, const double *par) {
  double s1 = par[0];
  k->c1 = (float)(-log(2 * s1)); k->h1 = (float)(1 / s1);
}

INLINE float laplace_logp(const prior_k *k, float w) { return k->c1 - bbb_absf(w) * k->h1; }

INLINE float laplace_dlogp(const prior_k *k, float w) {
  return bbb_self(w > 0, -k->h1, 0) + bbb_self(w < 0, k->h1, 0);
}

/* ---- The registry: its rows, and the dispatch over the kind. ---- */

#define NPAR_(...) ((int)(sizeof((bbb_prior_param[]){ __VA_ARGS__ }) / sizeof(bbb_prior_param)))
#define INFO_(ID, name, label, keeps, ...) \
  [BBB_PRIOR_##ID] = { #name, label, keeps, NPAR_(__VA_ARGS__), { __VA_ARGS__ } },
static const bbb_prior_info prior_infos[BBB_PRIOR_COUNT] = { BBB_PRIORS(INFO_) };
#undef INFO_

#define MAXPAR_(ID, name, label, keeps, ...) \
  _Static_assert(NPAR_(__VA_ARGS__) <= BBB_PRIOR_MAXPAR, #name ": more parameters than BBB_PRIOR_MAXPAR");
BBB_PRIORS(MAXPAR_)
#undef MAXPAR_

const bbb_prior_info *bbb_prior_info_of(int kind) {
  return kind > BBB_PRIOR_NONE && kind < BBB_PRIOR_COUNT ? &prior_infos[kind] : NULL;
}

int bbb_prior_kind_named(const char *name) {
  if (strcmp(name, "none") == 0) return BBB_PRIOR_NONE;
  for (int k = BBB_PRIOR_NONE + 1; k < BBB_PRIOR_COUNT; k++)
    if (strcmp(prior_infos[k].name, name) == 0) return k;
  return -1;
}

int bbb_prior_param_at(const bbb_prior_info *in, int i) {
  for (int rule = BBB_PAR_SCALE; rule <= BBB_PAR_UNIT; rule++)
    for (int j = 0; j < in->npar; j++)
      if (in->par[j].rule == rule && i-- == 0) return j;
  return -1;
}

int bbb_prior_check(const bbb_prior *p) {
  if (p->kind == BBB_PRIOR_NONE) return BBB_OK;
  const bbb_prior_info *in = bbb_prior_info_of(p->kind);
  if (!in) return bbb_error(BBB_EARG, "prior: unknown kind %d", p->kind);
  for (int i = 0; i < in->npar; i++) {
    int j = bbb_prior_param_at(in, i);
    double v = p->par[j];
    if (in->par[j].rule == BBB_PAR_SCALE && (!(v > 0) || !isfinite(v)))
      return bbb_error(BBB_EARG, "%s prior: %s must be positive and finite, got %g", in->label,
                       in->par[j].name, v);
    if (in->par[j].rule == BBB_PAR_UNIT && !(v > 0 && v < 1))
      return bbb_error(BBB_EARG, "%s prior: %s must be in (0, 1), got %g", in->label, in->par[j].name, v);
  }
  return BBB_OK;
}

static prior_k prior_consts(const bbb_prior *p) {
  prior_k k = { p->kind, 0, 0, 0, 0, 0, 0, 0 };
  switch (p->kind) {
#define CONSTS_(ID, name, ...) case BBB_PRIOR_##ID: name##_consts(&k, p->par); break;
  BBB_PRIORS(CONSTS_)
#undef CONSTS_
  }
  return k;
}

static int prior_keeps(const bbb_prior *p) {
  const bbb_prior_info *in = bbb_prior_info_of(p->kind);
  return in && in->keeps;
}

/* log p(w) without the kind's off. */
INLINE float prior_logp(int kind, const prior_k *k, float w) {
  switch (kind) {
#define LOGP_(ID, name, ...) case BBB_PRIOR_##ID: return name##_logp(k, w);
  BBB_PRIORS(LOGP_)
#undef LOGP_
  }
  return 0;
}

/* d log p / d w */
INLINE float prior_dlogp(int kind, const prior_k *k, float w) {
  switch (kind) {
#define DLOGP_(ID, name, ...) case BBB_PRIOR_##ID: return name##_dlogp(k, w);
  BBB_PRIORS(DLOGP_)
#undef DLOGP_
  }
  return 0;
}

/* d log p / d w from what the sample pass kept (kinds with keeps = 1). */
#define DLOGP_KEPT_0(name)
#define DLOGP_KEPT_1(name) return name##_dlogp_kept(k, w, kept);
INLINE float prior_dlogp_kept(int kind, const prior_k *k, float w, float kept) {
  switch (kind) {
#define DKEPT_(ID, name, label, keeps, ...) case BBB_PRIOR_##ID: DLOGP_KEPT_##keeps(name) break;
  BBB_PRIORS(DKEPT_)
#undef DKEPT_
  }
  return 0;
}

/* A chunk is sampled in two loops: the weights with log q, then log p over
** the weights just written (still in cache). One loop doing both held more
** constants than there are vector registers, and measured slower.
**
** Every rho of the chunk <= 0 (the usual case, sigma < log 2): with
** t = e^rho, sigma = log1p(t) and log sigma = rho + log(log1p(t) / t), the
** second term summed as the log of a product. */
INLINE double sample_neg(int out, fused_ctx *u, int64_t a, int64_t b) {
  const bbb_float *mu = u->mu, *rho = u->rho, *eps = u->eps;
  bbb_float *wout = u->w, *o = u->o;
  logprod lp = { 1.0, 0, 0 };
  double lin = 0;
  BLOCK_LOOP(a, b, lin, lp, {
    float r = rho[i], e = eps[i], q;
    float s = bbb_log1p_unit_q(bbb_expf_neg(r), &q);
    wout[i] = mu[i] + s * e;
    if (out == BBB_SAMPLE_VAR) o[i] = s * s;
    else if (out == BBB_SAMPLE_DELTA) o[i] = s * e;
    s1 += r + 0.5f * e * e;
    pr *= q;
  });
  return -lin - logprod_log(&lp);
}

/* Some rho > 0: softplus and log per weight. */
INLINE double sample_any(int out, fused_ctx *u, int64_t a, int64_t b) {
  const bbb_float *mu = u->mu, *rho = u->rho, *eps = u->eps;
  bbb_float *wout = u->w, *o = u->o;
  float lq = 0;
  #pragma omp simd reduction(+:lq)
  for (int64_t i = a; i < b; i++) {
    float r = rho[i], e = eps[i], s = bbb_softplusf(r);
    /* log sigma ~ rho where softplus(rho) ~ e^rho would underflow */
    float logs = bbb_self(r < -20, r, bbb_logf(s));
    wout[i] = mu[i] + s * e;
    if (out == BBB_SAMPLE_VAR) o[i] = s * s;
    else if (out == BBB_SAMPLE_DELTA) o[i] = s * e;
    lq += -logs - 0.5f * e * e;
  }
  return lq;
}

/* log p summed over the chunk's weights. */
INLINE double prior_loop(int kind, fused_ctx *u, int64_t a, int64_t b) {
  const bbb_float *wv = u->w;
  prior_k k = u->k;
  float lp = 0;
  #pragma omp simd reduction(+:lp)
  for (int64_t i = a; i < b; i++) lp += prior_logp(kind, &k, wv[i]);
  return lp;
}

/* log p summed over a chunk of the sample pass: the kind's own sum where it
** keeps a float per weight (then stored when u->tm is given), else
** prior_loop. */
#define LOGP_SUM_0(name, kind) prior_loop(kind, u, a, b)
#define LOGP_SUM_1(name, kind) (u->tm ? name##_logp_sum(1, u, a, b) : name##_logp_sum(0, u, a, b))
INLINE double prior_logp_sum(int kind, fused_ctx *u, int64_t a, int64_t b) {
  switch (kind) {
#define LSUM_(ID, name, label, keeps, ...) case BBB_PRIOR_##ID: return LOGP_SUM_##keeps(name, BBB_PRIOR_##ID);
  BBB_PRIORS(LSUM_)
#undef LSUM_
  }
  return 0;
}

INLINE void sample_kind(int kind, fused_ctx *u0, int64_t ch) {
  int64_t a = ch * CHUNK, b = a + CHUNK < u0->n ? a + CHUNK : u0->n;
  /* another output than w: the chunk's weights go to a scratch of the
  ** chunk's size (still in cache for the prior's loop), indexed from 0 */
  bbb_float scratch[u0->out == BBB_SAMPLE_W ? 1 : CHUNK];
  fused_ctx v, *u = u0;
  if (u0->out != BBB_SAMPLE_W) {
    v = *u0;
    v.mu += a; v.rho += a; v.eps += a; v.o += a;
    if (v.tm) v.tm += a;
    v.w = scratch;
    b -= a; a = 0;
    u = &v;
  }
  const bbb_float *rho = u->rho;
  float mx = -INFINITY;
  #pragma omp simd reduction(max:mx)
  for (int64_t i = a; i < b; i++) mx = rho[i] > mx ? rho[i] : mx;
  /* a NaN rho is not counted in mx; either path turns it into NaN */
  double lq;
  switch (u->out) {
  case BBB_SAMPLE_VAR: lq = mx <= 0.0f ? sample_neg(BBB_SAMPLE_VAR, u, a, b) : sample_any(BBB_SAMPLE_VAR, u, a, b); break;
  case BBB_SAMPLE_DELTA:
    lq = mx <= 0.0f ? sample_neg(BBB_SAMPLE_DELTA, u, a, b) : sample_any(BBB_SAMPLE_DELTA, u, a, b);
    break;
  default: lq = mx <= 0.0f ? sample_neg(BBB_SAMPLE_W, u, a, b) : sample_any(BBB_SAMPLE_W, u, a, b); break;
  }
  u0->logq[ch] = lq;
  u0->logp[ch] = kind == BBB_PRIOR_NONE ? 0 : prior_logp_sum(kind, u, a, b);
}

static void sample_chunk(void *c, int64_t lo, int64_t hi) {
  fused_ctx *u = c;
  for (int64_t ch = lo; ch < hi; ch++) {
    switch (u->k.kind) {
#define SAMPLE_(ID, ...) case BBB_PRIOR_##ID: sample_kind(BBB_PRIOR_##ID, u, ch); break;
    BBB_PRIORS(SAMPLE_)
#undef SAMPLE_
    default: sample_kind(BBB_PRIOR_NONE, u, ch); break;
    }
  }
}

/* grad mu += t, grad rho += (t eps - gkl / sigma) sigmoid(rho), with
** t = grad w - gkl d log p / d w: the likelihood and complexity paths in one pass.
** out: what the likelihood saw (gw is its gradient): w, or sigma^2 (then t
** has the complexity term alone and grad rho gains gw 2 sigma sigmoid(rho)),
** or sigma eps (grad rho gains gw eps sigmoid(rho)).
** fresh: 0 adds to the gradients, 1 writes them, 2 writes them and stores
** their sums of squares over [lo, hi) in sq[0] and sq[1]. */
INLINE void backward_loop(int out, int kind, int fresh, int stored, fused_ctx *u, int64_t lo, int64_t hi,
                          double *sq) {
  const bbb_float *mu = u->mu, *rho = u->rho, *eps = u->eps, *gw = u->gw, *tm = u->tm;
  bbb_float *gmu = u->gmu, *grho = u->grho;
  prior_k k = u->k;
  float gkl = u->gkl;
  double s1 = 0, s2 = 0;
  #pragma omp simd reduction(+:s1, s2)
  for (int64_t i = lo; i < hi; i++) {
    /* softplus and sigmoid from one e^-|rho| */
    float r = rho[i], e = eps[i], x = bbb_expf_neg(-bbb_absf(r));
    float s = bbb_self(r > 0.0f, r, 0.0f) + bbb_log1p_unit(x);
    float sg = bbb_self(r < 0.0f, x, 1.0f) / (1.0f + x);
    float t = out == BBB_SAMPLE_W ? gw[i] : 0.0f;
    if (stored) t -= gkl * prior_dlogp_kept(kind, &k, mu[i] + s * e, tm[i]);
    else if (kind != BBB_PRIOR_NONE) t -= gkl * prior_dlogp(kind, &k, mu[i] + s * e);
    float inv = bbb_self(r < -20, 1.0f, sg / s);   /* sigmoid/softplus -> 1 as rho -> -inf */
    float dr;
    if (out == BBB_SAMPLE_VAR) dr = (t * e + 2.0f * gw[i] * s) * sg - gkl * inv;
    else if (out == BBB_SAMPLE_DELTA) dr = (t + gw[i]) * e * sg - gkl * inv;
    else dr = t * e * sg - gkl * inv;
    if (fresh) { gmu[i] = t; grho[i] = dr; }   /* fresh buffers: no zero fill first */
    else { gmu[i] += t; grho[i] += dr; }
    if (fresh == 2) { s1 += (double)t * t; s2 += (double)dr * dr; }
  }
  if (fresh == 2) { sq[0] = s1; sq[1] = s2; }
}

/* backward_loop with the kind as a constant, and stored where the kind
** keeps a float per weight and the forward kept it (u->tm). */
#define BACKWARD_KEPT_0(out, kind, fresh, lo, hi, sq) backward_loop(out, kind, fresh, 0, u, lo, hi, sq)
#define BACKWARD_KEPT_1(out, kind, fresh, lo, hi, sq)             \
  if (u->tm) backward_loop(out, kind, fresh, 1, u, lo, hi, sq); \
  else backward_loop(out, kind, fresh, 0, u, lo, hi, sq)
INLINE void backward_prior(int out, int fresh, fused_ctx *u, int64_t lo, int64_t hi, double *sq) {
  switch (u->k.kind) {
#define BACK_(ID, name, label, keeps, ...) \
  case BBB_PRIOR_##ID: BACKWARD_KEPT_##keeps(out, BBB_PRIOR_##ID, fresh, lo, hi, sq); break;
  BBB_PRIORS(BACK_)
#undef BACK_
  default: backward_loop(out, BBB_PRIOR_NONE, fresh, 0, u, lo, hi, sq); break;
  }
}

#define BACKWARD_KINDS(fresh, lo, hi, sq) switch (u->out) {                                      \
  case BBB_SAMPLE_VAR: backward_prior(BBB_SAMPLE_VAR, fresh, u, lo, hi, sq); break;               \
  case BBB_SAMPLE_DELTA: backward_prior(BBB_SAMPLE_DELTA, fresh, u, lo, hi, sq); break;           \
  default: backward_prior(BBB_SAMPLE_W, fresh, u, lo, hi, sq); break; }

static void sample_backward_range(void *c, int64_t lo, int64_t hi) {
  fused_ctx *u = c;
  if (u->fresh) { BACKWARD_KINDS(1, lo, hi, NULL) } else { BACKWARD_KINDS(0, lo, hi, NULL) }
}

/* Fresh gradients by chunks, which are bbb_sqnorm's chunks, with each
** chunk's sums of squares formed as the values are written: the
** optimizer's gradient norm then needs no pass over memory of its own. The
** loop forms them as bbb_sqnorm_chunk does (the same simd reduction over
** the same range), and bayes_spec checks the two agree bit for bit; were
** they ever to differ in the last bit, the norm would still bound every
** |g|, as any order of adding squares does. */
_Static_assert(BBB_BAYES_CHUNK == BBB_SUM_CHUNK, "the backward's chunks must be bbb_sqnorm's");

static void sample_backward_chunks(void *c, int64_t lo, int64_t hi) {
  fused_ctx *u = c;
  for (int64_t ch = lo; ch < hi; ch++) {
    int64_t a = ch * CHUNK, b = a + CHUNK < u->n ? a + CHUNK : u->n;
    double sq[2];
    BACKWARD_KINDS(2, a, b, sq)
    u->sq[ch] = sq[0];
    u->sq[u->nch + ch] = sq[1];
  }
}

/* The backward pass by chunks into fresh gradients, and their sums of
** squares: each chunk's, added in chunk order, as bbb_sqnorm adds them.
** u->sq holds 2 u->nch doubles. */
static void backward_with_sums(fused_ctx *u, double *smu, double *srho) {
  bbb_parallel_for(u->nch, 1, sample_backward_chunks, u);
  double a = 0, b = 0;
  for (int64_t c = 0; c < u->nch; c++) { a += u->sq[c]; b += u->sq[u->nch + c]; }
  *smu = a;
  *srho = b;
}

static int sample_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK, fmu, frho;
  bbb_tensor *mu = nd->in[0].t, *rho = nd->in[1].t, *eps = nd->in[2].t;
  bbb_tensor *kept = nd->nin > 3 ? nd->in[3].t : NULL;
  prior_saved *sv = bbb_node_ctx(nd);
  bbb_prior p = sv->prior;
  int64_t n = mu->numel;
  bbb_float *gmu = bbb_grad_begin(mu, &fmu, &st), *grho = bbb_grad_begin(rho, &frho, &st);
  bbb_float *scratch = NULL;
  if (st) return st;
  if (!gmu || !grho) {   /* a frozen mu or rho: its gradient goes to scratch */
    scratch = malloc((size_t)(n ? n : 1) * sizeof *scratch);
    if (!scratch) return bbb_error(BBB_EMEM, "bayes_sample backward: out of memory");
    if (!gmu) { gmu = scratch; fmu = 1; } else { grho = scratch; frho = 1; }
  }
  /* one loop writes both: if only one is new, zero it and accumulate */
  if (fmu != frho) memset(fmu ? gmu : grho, 0, (size_t)n * sizeof *gmu);
  fused_ctx u = { prior_consts(&p), bbb_data(mu), bbb_data(rho), bbb_data(eps), g,
                  NULL, gmu, grho, (float)sv->kl_grad, n, NULL, NULL, fmu && frho,
                  kept ? bbb_data(kept) : NULL, NULL, 0, NULL, sv->out };
  sv->kl_grad = 0;   /* consumed: a retained graph starts clean */
  /* both gradients new (the training step's case): the pass keeps their
  ** sums of squares (without memory for the sums it runs without them) */
  int64_t nch = (n + CHUNK - 1) / CHUNK;
  u.sq = u.fresh && !scratch && n > 0 ? malloc(2 * (size_t)nch * sizeof *u.sq) : NULL;
  u.nch = nch;
  if (u.sq) {
    double smu, srho;
    backward_with_sums(&u, &smu, &srho);
    if (!bbb_interrupted()) {
      bbb_sqnorm_keep(bbb_tensor_grad(mu), smu);
      bbb_sqnorm_keep(bbb_tensor_grad(rho), srho);
    }
  } else {
    bbb_parallel_for(n, CHUNK, sample_backward_range, &u);
  }
  free(u.sq);
  free(scratch);
  return BBB_OK;
}

/* The complexity term hands its gradient weight to the sample node, which
** runs after it (it consumes w), so both paths share one pass. */
static int kl_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *w = nd->in[0].t;
  bbb_node *wn = bbb_node_of(w);
  if (!wn) return BBB_OK;
  ((prior_saved *)bbb_node_ctx(wn))->kl_grad += g[0];
  bbb_grad_mark(w, &st);   /* makes sure the sample node runs */
  return st;
}

/* The sampling pass over n weights into w (or, for another out, into a
** chunk's scratch and the output o = w), with the mixture's exponential
** into kept when given; part: 2 doubles per chunk. Returns the complexity
** term as a float, as the op's 0-d output holds it. */
static bbb_float sample_pass(bbb_float *w, const bbb_float *mu, const bbb_float *rho, const bbb_float *eps,
                             bbb_float *kept, int64_t n, const bbb_prior *p, int out, double *part) {
  int64_t nch = (n + CHUNK - 1) / CHUNK;
  fused_ctx u = { prior_consts(p), mu, rho, eps, NULL, w, NULL, NULL, 0, n, part, part + nch, 0, kept,
                  NULL, 0, out == BBB_SAMPLE_W ? NULL : w, out };
  bbb_parallel_for(nch, 1, sample_chunk, &u);
  double lq = -HALF_LOG_2PI * (double)n, lp = u.k.off * (double)n;
  for (int64_t c = 0; c < nch; c++) { lq += part[c]; lp += part[nch + c]; }
  return (bbb_float)(p->kind == BBB_PRIOR_NONE ? lq : lq - lp);
}

/* Without the graph: see bayes.h. */
int bbb_bayes_sample_into(bbb_float *w, bbb_float *kl, const bbb_float *mu, const bbb_float *rho,
                          const bbb_float *eps, bbb_float *kept, int64_t n, const bbb_prior *p) {
  int64_t nch = (n + CHUNK - 1) / CHUNK;
  if (nch > MAXCHUNKS) return bbb_error(BBB_ESHAPE, "bayes_sample: %lld weights is too many", (long long)n);
  double part[2 * 64], *pt = nch <= 64 ? part : malloc(2 * (size_t)nch * sizeof *pt);
  if (!pt) return bbb_error(BBB_EMEM, "bayes_sample: out of memory");
  *kl = sample_pass(w, mu, rho, eps, prior_keeps(p) ? kept : NULL, n, p, BBB_SAMPLE_W, pt);
  if (pt != part) free(pt);
  return bbb_interrupted() ? bbb_error(BBB_EINTR, "bayes_sample: interrupted") : BBB_OK;
}

int bbb_bayes_backward_into(bbb_float *gmu, bbb_float *grho, double *sqmu, double *sqrho,
                            const bbb_float *mu, const bbb_float *rho, const bbb_float *eps,
                            const bbb_float *gw, const bbb_float *kept, int64_t n, const bbb_prior *p,
                            bbb_float gkl) {
  int64_t nch = (n + CHUNK - 1) / CHUNK;
  if (nch > MAXCHUNKS) return bbb_error(BBB_ESHAPE, "bayes_sample: %lld weights is too many", (long long)n);
  double sq[2 * 64], *s = nch <= 64 ? sq : malloc(2 * (size_t)nch * sizeof *s);
  if (!s) return bbb_error(BBB_EMEM, "bayes_sample backward: out of memory");
  fused_ctx u = { prior_consts(p), mu, rho, eps, gw, NULL, gmu, grho, gkl, n, NULL, NULL, 1,
                  prior_keeps(p) ? (bbb_float *)kept : NULL, s, nch, NULL, BBB_SAMPLE_W };
  backward_with_sums(&u, sqmu, sqrho);
  if (s != sq) free(s);
  return bbb_interrupted() ? bbb_error(BBB_EINTR, "bayes_sample backward: interrupted") : BBB_OK;
}

int bbb_bayes_sample(bbb_tensor **wout, bbb_tensor **klout, bbb_tensor *mu, bbb_tensor *rho,
                     const bbb_prior *p, bbb_rng *g, bbb_tensor *eps, int out) {
  char s1[96], s2[96];
  *wout = NULL; *klout = NULL;
  int st = bbb_prior_check(p);
  if (st) return st;
  if (out != BBB_SAMPLE_W && out != BBB_SAMPLE_VAR && out != BBB_SAMPLE_DELTA)
    return bbb_error(BBB_EARG, "bayes_sample: unknown output %d", out);
  if (!bbb_same_shape(mu, rho))
    return bbb_error(BBB_ESHAPE, "bayes_sample: mu %s and rho %s differ in shape",
                     bbb_shape_str(mu, s1, sizeof s1), bbb_shape_str(rho, s2, sizeof s2));
  if (eps && !bbb_same_shape(mu, eps))
    return bbb_error(BBB_ESHAPE, "bayes_sample: eps %s does not match mu %s",
                     bbb_shape_str(eps, s1, sizeof s1), bbb_shape_str(mu, s2, sizeof s2));
  int64_t n = mu->numel, nch = (n + CHUNK - 1) / CHUNK;
  if (nch > MAXCHUNKS) return bbb_error(BBB_ESHAPE, "bayes_sample: %lld weights is too many", (long long)n);
  bbb_tensor *e = eps ? bbb_tensor_clone(eps) : bbb_tensor_new(mu->ndim, mu->shape);
  bbb_tensor *w = bbb_tensor_new(mu->ndim, mu->shape), *kl = bbb_tensor_new(0, NULL);
  /* the prior's float per weight (the mixture's exponential), kept for the
  ** backward pass when there is one */
  int keep = prior_keeps(p) && bbb_grad_enabled()
             && (bbb_tensor_requires_grad(mu) || bbb_tensor_requires_grad(rho));
  bbb_tensor *kept = keep ? bbb_tensor_new(mu->ndim, mu->shape) : NULL;
  double *part = malloc(2 * (size_t)(nch ? nch : 1) * sizeof *part);
  if (!e || !w || !kl || !part || (keep && !kept)) {
    bbb_tensor_release(e); bbb_tensor_release(w); bbb_tensor_release(kl); free(part);
    bbb_tensor_release(kept);
    return bbb_error(BBB_EMEM, "bayes_sample: out of memory");
  }
  if (!eps) bbb_rng_normal(g, bbb_data(e), n, 0, 1);
  bbb_data(kl)[0] = sample_pass(bbb_data(w), bbb_data(mu), bbb_data(rho), bbb_data(e),
                                kept ? bbb_data(kept) : NULL, n, p, out, part);
  free(part);

  bbb_tensor *in[4] = { mu, rho, e, kept };
  bbb_node *nd;
  prior_saved sv = { *p, 0, out };
  st = bbb_record(w, BBB_OP_BAYES_SAMPLE, 0, sample_backward, kept ? 4 : 3, in, kept ? 15u : 7u,
                  &sv, sizeof sv, &nd);
  bbb_tensor_release(e);   /* the node holds them if it needs them */
  bbb_tensor_release(kept);
  if (!st && nd) st = bbb_record(kl, BBB_OP_BAYES_KL, 0, kl_backward, 1, &w, 0u, NULL, 0, NULL);
  if (st) { bbb_tensor_release(w); bbb_tensor_release(kl); return st; }
  *wout = w; *klout = kl;
  return BBB_OK;
}

/* ---- log p(w) as an op of its own ---- */

typedef struct { prior_k k; const bbb_float *w; const bbb_float *g; bbb_float *gw; int64_t n; double *part; } lp_ctx;

INLINE void logp_loop(int kind, lp_ctx *u, int64_t ch) {
  int64_t a = ch * CHUNK, b = a + CHUNK < u->n ? a + CHUNK : u->n;
  prior_k k = u->k;
  const bbb_float *w = u->w;   /* hoisted: through u the loads became gathers */
  float s = 0;
  #pragma omp simd reduction(+:s)
  for (int64_t i = a; i < b; i++) s += prior_logp(kind, &k, w[i]);
  u->part[ch] = s;
}

static void logp_chunk(void *c, int64_t lo, int64_t hi) {
  lp_ctx *u = c;
  for (int64_t ch = lo; ch < hi; ch++) {
    switch (u->k.kind) {
#define LOGP_LOOP_(ID, ...) case BBB_PRIOR_##ID: logp_loop(BBB_PRIOR_##ID, u, ch); break;
    BBB_PRIORS(LOGP_LOOP_)
#undef LOGP_LOOP_
    }
  }
}

INLINE void dlogp_loop(int kind, lp_ctx *u, int64_t lo, int64_t hi) {
  prior_k k = u->k;
  float g = u->g[0];
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) u->gw[i] += g * prior_dlogp(kind, &k, u->w[i]);
}

static void logp_backward_range(void *c, int64_t lo, int64_t hi) {
  lp_ctx *u = c;
  switch (u->k.kind) {
#define DLOGP_LOOP_(ID, ...) case BBB_PRIOR_##ID: dlogp_loop(BBB_PRIOR_##ID, u, lo, hi); break;
  BBB_PRIORS(DLOGP_LOOP_)
#undef DLOGP_LOOP_
  }
}

static int logp_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *w = nd->in[0].t;
  const prior_saved *sv = bbb_node_ctx(nd);
  bbb_prior p = sv->prior;
  lp_ctx u = { prior_consts(&p), bbb_data(w), g, bbb_grad_of(w, &st), w->numel, NULL };
  if (u.gw) bbb_parallel_for(w->numel, CHUNK, logp_backward_range, &u);
  return st;
}

int bbb_prior_log_prob(bbb_tensor **out, const bbb_prior *p, bbb_tensor *w) {
  *out = NULL;
  int st = bbb_prior_check(p);
  if (st) return st;
  if (p->kind == BBB_PRIOR_NONE) return bbb_error(BBB_EARG, "prior_log_prob: no prior given");
  int64_t nch = (w->numel + CHUNK - 1) / CHUNK;
  double *part = malloc((size_t)(nch ? nch : 1) * sizeof *part);
  bbb_tensor *y = bbb_tensor_new(0, NULL);
  if (!part || !y) { free(part); bbb_tensor_release(y); return bbb_error(BBB_EMEM, "prior_log_prob: out of memory"); }
  lp_ctx u = { prior_consts(p), bbb_data(w), NULL, NULL, w->numel, part };
  bbb_parallel_for(nch, 1, logp_chunk, &u);
  double s = u.k.off * (double)w->numel;
  for (int64_t c = 0; c < nch; c++) s += part[c];
  free(part);
  bbb_data(y)[0] = (bbb_float)s;
  prior_saved sv = { *p, 0, BBB_SAMPLE_W };
  st = bbb_record(y, BBB_OP_PRIOR_LOG_PROB, 0, logp_backward, 1, &w, 1u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}
