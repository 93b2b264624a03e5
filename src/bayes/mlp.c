/*
** mlp.c: a ReLU network's ELBO gradient without the graph (see mlp.h).
** It calls the graph's kernels: each step runs the kernel that the graph's
** op runs (ops.h, bayes.h), in the graph's order, and its comment names
** the op; the only arithmetic here forms the scalars the Lua hands those
** ops (loss_scalars). Where the graph's gradient buffer would be new, it
** is zeroed before the backward kernel adds to it, as the op zeroes it
** (0 + v turns a -0 into +0), so the bits are the graph's.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "bayes/mlp.h"
#include "engine/ops.h"
#include "bayes/optim.h"
#include "engine/parallel.h"
#include "engine/runtime.h"

static int64_t n_in(const bbb_mlp_layer *L, int bayes) { return (bayes ? L->wmu : L->w)->shape[1]; }
static int64_t n_out(const bbb_mlp_layer *L, int bayes) { return (bayes ? L->wmu : L->w)->shape[0]; }
static bbb_tensor *bias_of(const bbb_mlp_layer *L, int bayes) { return bayes ? L->bmu : L->b; }

static int need(const bbb_tensor *t, int64_t rows, int64_t cols, int l, const char *what) {
  char s[96];
  int ok = t && (cols ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols
                      : t->ndim == 1 && t->shape[0] == rows);
  if (!ok)
    return bbb_error(BBB_ESHAPE, "mlp: layer %d's %s must be %lld%s%lld, got %s", l + 1, what, (long long)rows,
                     cols ? " x " : "", (long long)(cols ? cols : 0), t ? bbb_shape_str(t, s, sizeof s) : "nothing");
  if (!bbb_tensor_requires_grad(t))
    return bbb_error(BBB_EARG, "mlp: layer %d's %s does not require grad", l + 1, what);
  return BBB_OK;
}

int bbb_mlp_check(const bbb_mlp *m) {
  if (m->n < 1 || m->n > BBB_MLP_MAX_LAYERS)
    return bbb_error(BBB_EARG, "mlp: 1 to %d layers, got %d", BBB_MLP_MAX_LAYERS, m->n);
  int drops = 0;
  for (int l = 0; l < m->n; l++) {
    double p = m->layer[l].dropout;
    if (!(p >= 0 && p < 1) || (p > 0 && l == m->n - 1))
      return bbb_error(BBB_EARG, "mlp: layer %d's dropout must be in [0, 1) and follow a hidden layer, got %g",
                       l + 1, p);
    drops += p > 0;
  }
  if ((m->bayes || drops) && !m->gen)
    return bbb_error(BBB_EARG, "mlp: Bayesian layers and dropout need a generator");
  int64_t width = -1;
  for (int l = 0; l < m->n; l++) {
    const bbb_mlp_layer *L = &m->layer[l];
    bbb_tensor *w = m->bayes ? L->wmu : L->w;
    if (!w || w->ndim != 2) return bbb_error(BBB_ESHAPE, "mlp: layer %d has no 2-d weight", l + 1);
    int64_t o = w->shape[0], in = w->shape[1];
    if (width >= 0 && in != width)
      return bbb_error(BBB_ESHAPE, "mlp: layer %d takes %lld inputs, the layer before gives %lld", l + 1,
                       (long long)in, (long long)width);
    width = o;
    int st = need(w, o, in, l, m->bayes ? "weight mu" : "weight");
    if (!st && m->bayes) st = need(L->wrho, o, in, l, "weight rho");
    if (!st && bias_of(L, m->bayes)) st = need(bias_of(L, m->bayes), o, 0, l, m->bayes ? "bias mu" : "bias");
    if (!st && m->bayes && L->bmu) st = need(L->brho, o, 0, l, "bias rho");
    if (!st && m->bayes && !L->bmu && L->brho) st = bbb_error(BBB_EARG, "mlp: layer %d has a bias rho without its mu", l + 1);
    if (!st && m->bayes) st = bbb_prior_check(&L->prior);
    if (!st && m->bayes && L->prior.kind == BBB_PRIOR_NONE)
      st = bbb_error(BBB_EARG, "mlp: layer %d needs a C prior", l + 1);
    if (st) return st;
  }
  return BBB_OK;
}

void bbb_mlp_free(bbb_mlp *m) {
  free(m->ws);
  m->ws = NULL;
  m->ws_len = 0;
}

/* The workspace of one step, carved in order from m->ws. */
typedef struct {
  bbb_float *eps, *wb, *kept, *gwb;   /* Bayesian: noise, sample, mixture's kept, grad of the sample */
  bbb_float *z, *h, *gz;              /* pre-activation, activation, grad of the pre-activation */
  bbb_float *mask;                    /* the dropout mask */
} layer_ws;

/* Each layer's buffers, then the likelihood's three of ny floats (*r: the
** residual, and two for the values and gradients after it), then *gh, a
** gradient as wide as the widest layer. */
static int carve(bbb_mlp *m, int64_t B, int64_t ny, layer_ws *lw, bbb_float **r, bbb_float **gh) {
  int64_t len = 3 * ny, widest = 0;
  for (int l = 0; l < m->n; l++) {
    int64_t o = n_out(&m->layer[l], m->bayes), nwb = o * n_in(&m->layer[l], m->bayes) + o;
    len += (m->bayes ? 4 * nwb : 0) + 4 * B * o;
    widest = o > widest ? o : widest;
  }
  len += B * widest;
  if (len > m->ws_len) {
    bbb_float *p = realloc(m->ws, (size_t)len * sizeof *p);
    if (!p) return bbb_error(BBB_EMEM, "mlp: out of memory for a workspace of %lld floats", (long long)len);
    m->ws = p;
    m->ws_len = len;
  }
  bbb_float *p = m->ws;
  for (int l = 0; l < m->n; l++) {
    int64_t o = n_out(&m->layer[l], m->bayes), nwb = o * n_in(&m->layer[l], m->bayes) + o;
    if (m->bayes) {
      lw[l].eps = p; p += nwb;
      lw[l].wb = p; p += nwb;
      lw[l].kept = p; p += nwb;
      lw[l].gwb = p; p += nwb;
    }
    lw[l].z = p; p += B * o;
    lw[l].h = p; p += B * o;
    lw[l].gz = p; p += B * o;
    lw[l].mask = p; p += B * o;
  }
  *r = p; p += 3 * ny;
  *gh = p;
  return BBB_OK;
}

/* Draws the layer's noise and samples weight and bias (bayes_sample, the
** weight's normals first); the layer's complexity term klw + klb. */
static int sample_layer(bbb_mlp *m, const bbb_mlp_layer *L, layer_ws *w, int64_t nw, int64_t o,
                        bbb_float *kl) {
  bbb_float klw, klb = 0;
  bbb_rng_normal(m->gen, w->eps, nw, 0, 1);
  int st = bbb_bayes_sample_into(w->wb, &klw, bbb_data(L->wmu), bbb_data(L->wrho), w->eps, w->kept, nw,
                                 &L->prior);
  if (!st && L->bmu) {
    bbb_rng_normal(m->gen, w->eps + nw, o, 0, 1);
    st = bbb_bayes_sample_into(w->wb + nw, &klb, bbb_data(L->bmu), bbb_data(L->brho), w->eps + nw,
                               w->kept + nw, o, &L->prior);
  }
  if (L->bmu) bbb_add_forward(kl, &klw, &klb, 1);   /* klw + klb */
  else bbb_adds_forward(kl, &klw, 0, 1);            /* klw + 0: no bias */
  return st;
}

/* grad mu and grad rho of one posterior from the grad of its sample, with
** their sums of squares kept for the optimizer's norm. */
static int posterior_grad(bbb_tensor *mu, bbb_tensor *rho, const bbb_float *eps, const bbb_float *gw,
                          const bbb_float *kept, const bbb_prior *p, bbb_float gkl) {
  int st = BBB_OK, f1, f2;
  bbb_float *gmu = bbb_grad_begin(mu, &f1, &st), *grho = bbb_grad_begin(rho, &f2, &st);
  if (st) return st;
  double smu, srho;
  st = bbb_bayes_backward_into(gmu, grho, &smu, &srho, bbb_data(mu), bbb_data(rho), eps, gw, kept, mu->numel,
                               p, gkl);
  if (st) return st;
  bbb_sqnorm_keep(bbb_tensor_grad(mu), smu);
  bbb_sqnorm_keep(bbb_tensor_grad(rho), srho);
  return BBB_OK;
}

static void zero(bbb_float *p, int64_t n) { memset(p, 0, (size_t)n * sizeof *p); }

/* forward: per layer bayes_sample (w, then b), linear, relu, dropout; *kl
** the complexity terms summed as Module:kl sums them. */
static int forward(bbb_mlp *m, const bbb_float *x, int64_t B, layer_ws *lw, bbb_float *kl) {
  const bbb_float *in = x;
  for (int l = 0; l < m->n; l++) {
    const bbb_mlp_layer *L = &m->layer[l];
    int64_t o = n_out(L, m->bayes), ni = n_in(L, m->bayes), nw = o * ni;
    const bbb_float *W, *bv = NULL;
    if (m->bayes) {
      bbb_float kl_l;
      int st = sample_layer(m, L, &lw[l], nw, o, &kl_l);
      if (st) return st;
      if (l == 0) *kl = kl_l;
      else bbb_add_forward(kl, kl, &kl_l, 1);   /* Module:kl: total + k */
      W = lw[l].wb;
      if (L->bmu) bv = lw[l].wb + nw;
    } else {
      W = bbb_data(L->w);
      if (L->b) bv = bbb_data(L->b);
    }
    bbb_linear_forward(lw[l].z, in, W, bv, B, ni, o);   /* linear */
    if (l < m->n - 1) {
      bbb_float *h = lw[l].h;
      bbb_relu_forward(h, lw[l].z, B * o);              /* relu */
      if (L->dropout > 0) {                             /* x * dropout_mask */
        bbb_dropout_mask(lw[l].mask, m->gen, B * o, L->dropout);
        bbb_mul_forward(h, h, lw[l].mask, B * o);
      }
      in = h;
    }
  }
  return BBB_OK;
}

/* The scalars the Lua hands the loss's ops: gaussian_loglik's
** -1 / (2 sigma^2) and -(n log sigma + n log(2 pi) / 2), the ELBO's kl
** weight and 1 / B, each rounded to a float as the scalar ops round them.
** No contraction: the Lua rounds each operation. */
typedef struct { bbb_float k, negc, w, perB; int bayes; } loss_ops;

__attribute__((optimize("fp-contract=off")))
static loss_ops loss_scalars(double sigma, double kl_weight, int64_t B, int64_t ny, int bayes) {
  double c = (double)ny * (log(sigma) + 0.5 * log(2 * M_PI));
  loss_ops s = { (bbb_float)(-0.5 / (sigma * sigma)), (bbb_float)(-c), (bbb_float)kl_weight,
                 (bbb_float)(1.0 / (double)B), bayes };
  return s;
}

/* The loss from the output f and the targets y (ny each), as elbo.lua and
** bbb.gaussian_loglik form it: ((-(sum((y - f)^2 * k) - c)) + kl * w) / B.
** r and t: ny floats each, r keeps y - f for the backward. */
static void loss_forward(bbb_mlp_terms *terms, bbb_float *r, bbb_float *t, const bbb_float *f,
                         const bbb_float *y, int64_t ny, bbb_float kl, const loss_ops *s) {
  bbb_float sum, ll, nll, wkl, total;
  bbb_sub_forward(r, y, f, ny);                   /* y - mu */
  bbb_square_forward(t, r, ny);                   /* square */
  bbb_muls_forward(t, t, s->k, ny);               /* * k */
  sum = (bbb_float)bbb_sum_floats(t, ny);         /* sum */
  bbb_adds_forward(&ll, &sum, s->negc, 1);        /* - c */
  bbb_neg_forward(&nll, &ll, 1);                  /* the ELBO's -loglik */
  total = nll;
  if (s->bayes) {
    bbb_muls_forward(&wkl, &kl, s->w, 1);         /* kl * w */
    bbb_add_forward(&total, &nll, &wkl, 1);       /* nll + kl * w */
  }
  bbb_muls_forward(&terms->loss, &total, s->perB, 1);   /* * (1 / B) */
  terms->nll = nll;
  terms->kl = s->bayes ? kl : 0;
}

/* Its backward, each op's gradient new (zeroed) as in the graph: g (ny) =
** d loss / d f, *gkl = d loss / d kl (the adds that sum the layers' terms
** pass it on as it is: it is never -0). u: ny floats more. */
static void loss_backward(bbb_float *g, bbb_float *gkl, bbb_float *t, bbb_float *u, const bbb_float *r,
                          int64_t ny, const loss_ops *s) {
  bbb_float seed = 1, gtot = 0, gnll = 0, gwkl = 0, gll = 0, gsum = 0;
  bbb_muls_backward(&gtot, &seed, s->perB, 1);    /* * (1 / B), from backward's seed */
  if (s->bayes) {
    bbb_add_backward(&gnll, &gtot, 1, 1);         /* nll + kl * w: both sides */
    bbb_add_backward(&gwkl, &gtot, 1, 1);
    *gkl = 0;
    bbb_muls_backward(gkl, &gwkl, s->w, 1);       /* kl * w */
  } else {
    gnll = gtot;
  }
  bbb_neg_backward(&gll, &gnll, 1);               /* -loglik */
  bbb_adds_backward(&gsum, &gll, 1);              /* - c */
  zero(t, ny);
  bbb_sum_backward(t, gsum, ny, 1);               /* sum */
  zero(u, ny);
  bbb_muls_backward(u, t, s->k, ny);              /* * k */
  zero(t, ny);
  bbb_square_backward(t, u, r, ny);               /* square */
  bbb_sub_backward(g, t, ny, 1);                  /* y - mu: mu's side, new */
}

/* backward: per layer from the last, linear's grad x (then dropout's mul
** and relu's), grad w and grad b; then bayes_sample's, given gkl. gh: the
** widest layer's B rows. */
static int backward(bbb_mlp *m, const bbb_float *x, int64_t B, layer_ws *lw, bbb_float *gh, bbb_float gkl) {
  const bbb_float *g = lw[m->n - 1].gz;
  for (int l = m->n - 1; l >= 0; l--) {
    const bbb_mlp_layer *L = &m->layer[l];
    int64_t o = n_out(L, m->bayes), ni = n_in(L, m->bayes), nw = o * ni;
    const bbb_float *xin = l ? lw[l - 1].h : x, *W = m->bayes ? lw[l].wb : bbb_data(L->w);
    int fw, fb, st = BBB_OK;
    bbb_float *gw = m->bayes ? lw[l].gwb : bbb_grad_begin(L->w, &fw, &st);
    bbb_tensor *bt = bias_of(L, m->bayes);
    bbb_float *gb = !bt ? NULL : m->bayes ? lw[l].gwb + nw : bbb_grad_begin(bt, &fb, &st);
    if (st) return st;
    if (l > 0) {
      bbb_gemm(0, 0, B, ni, o, g, W, 0.0f, gh);                      /* linear: grad x, new */
      if (m->layer[l - 1].dropout > 0)
        bbb_mul_backward(gh, gh, lw[l - 1].mask, B * ni, 1);         /* x * dropout_mask */
      zero(lw[l - 1].gz, B * ni);
      bbb_relu_backward(lw[l - 1].gz, gh, lw[l - 1].z, B * ni);      /* relu */
    }
    bbb_gemm(1, 0, o, ni, B, g, xin, 0.0f, gw);                      /* linear: grad w */
    if (gb) {
      zero(gb, o);
      bbb_bias_grad(gb, g, B, o);                                    /* linear: grad b */
    }
    if (m->bayes) {
      st = posterior_grad(L->wmu, L->wrho, lw[l].eps, lw[l].gwb, lw[l].kept, &L->prior, gkl);
      if (!st && L->bmu)
        st = posterior_grad(L->bmu, L->brho, lw[l].eps + nw, lw[l].gwb + nw, lw[l].kept + nw, &L->prior, gkl);
      if (st) return st;
    }
    if (l > 0) g = lw[l - 1].gz;
  }
  return BBB_OK;
}

int bbb_mlp_grad(bbb_mlp *m, const bbb_tensor *x, const bbb_tensor *y, double sigma, double kl_weight,
                 bbb_mlp_terms *terms) {
  char s1[96];
  int st = bbb_mlp_check(m);
  if (st) return st;
  int64_t in0 = n_in(&m->layer[0], m->bayes), oL = n_out(&m->layer[m->n - 1], m->bayes);
  if (x->ndim != 2 || x->shape[1] != in0 || x->shape[0] < 1)
    return bbb_error(BBB_ESHAPE, "mlp: input %s does not match the first layer's %lld inputs",
                     bbb_shape_str(x, s1, sizeof s1), (long long)in0);
  int64_t B = x->shape[0], ny = B * oL;
  if (y->numel != ny)
    return bbb_error(BBB_ESHAPE, "mlp: %lld targets for %lld outputs", (long long)y->numel, (long long)ny);
  if (!(sigma > 0) || !isfinite(sigma)) return bbb_error(BBB_EARG, "mlp: sigma must be > 0, got %g", sigma);
  if (!isfinite(kl_weight)) return bbb_error(BBB_EARG, "mlp: kl_weight must be finite, got %g", kl_weight);
  if ((st = bbb_blas_room("mlp"))) return st;
  layer_ws lw[BBB_MLP_MAX_LAYERS];
  bbb_float *r = NULL, *gh = NULL, kl = 0, gkl = 0;
  if ((st = carve(m, B, ny, lw, &r, &gh))) return st;
  if ((st = forward(m, bbb_data(x), B, lw, &kl))) return st;
  loss_ops s = loss_scalars(sigma, kl_weight, B, ny, m->bayes);
  loss_forward(terms, r, r + ny, lw[m->n - 1].z, bbb_data(y), ny, kl, &s);
  loss_backward(lw[m->n - 1].gz, &gkl, r + ny, r + 2 * ny, r, ny, &s);
  if ((st = backward(m, bbb_data(x), B, lw, gh, gkl))) return st;
  return bbb_interrupted() ? bbb_error(BBB_EINTR, "mlp: interrupted") : BBB_OK;
}
