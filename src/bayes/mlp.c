/*
** mlp.c: a ReLU network's ELBO gradient without the graph (see mlp.h).
** Every line below names the graph op whose arithmetic it repeats; where a
** gradient buffer would be new in the graph, the op adds its value to 0,
** and so does this file (0 + v turns a -0 into +0).
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

static int carve(bbb_mlp *m, int64_t B, int64_t ny, layer_ws *lw, bbb_float **r, bbb_float **gh) {
  int64_t len = 2 * ny, widest = 0;
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
  *r = p; p += 2 * ny;
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
  *kl = klw + klb;   /* klw + klb, or klw + 0 (no bias) */
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

/* No contraction: a * b + c is two roundings in the graph's ops. */
__attribute__((optimize("fp-contract=off")))
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
  bbb_float *r = NULL, *gh = NULL;
  if ((st = carve(m, B, ny, lw, &r, &gh))) return st;

  /* forward: per layer bayes_sample (w, then b), linear, relu */
  const bbb_float *in = bbb_data(x);
  bbb_float kl = 0;
  for (int l = 0; l < m->n; l++) {
    const bbb_mlp_layer *L = &m->layer[l];
    int64_t o = n_out(L, m->bayes), ni = n_in(L, m->bayes), nw = o * ni;
    const bbb_float *W, *bv = NULL;
    if (m->bayes) {
      bbb_float kl_l;
      if ((st = sample_layer(m, L, &lw[l], nw, o, &kl_l))) return st;
      kl = l == 0 ? kl_l : kl + kl_l;   /* Module:kl, layer by layer */
      W = lw[l].wb;
      if (L->bmu) bv = lw[l].wb + nw;
    } else {
      W = bbb_data(L->w);
      if (L->b) bv = bbb_data(L->b);
    }
    bbb_float *z = lw[l].z;
    for (int64_t i = 0; i < B; i++) {   /* linear: the rows start at the bias */
      if (bv) memcpy(z + i * o, bv, (size_t)o * sizeof *z);
      else memset(z + i * o, 0, (size_t)o * sizeof *z);
    }
    bbb_gemm(0, 1, B, o, ni, in, W, 1, z);
    if (l < m->n - 1) {
      bbb_float *h = lw[l].h;
      for (int64_t i = 0; i < B * o; i++) h[i] = z[i] > 0 ? z[i] : 0;   /* relu */
      if (L->dropout > 0) {   /* dropout_mask (uniforms, then the threshold), then mul */
        bbb_float *mk = lw[l].mask, pf = (bbb_float)L->dropout, keep = (bbb_float)(1 / (1 - L->dropout));
        bbb_rng_uniform(m->gen, mk, B * o, 0, 1);
        for (int64_t i = 0; i < B * o; i++) {
          mk[i] = mk[i] > pf ? keep : 0.0f;
          h[i] = h[i] * mk[i];
        }
      }
      in = h;
    }
  }

  /* the likelihood, as bbb.gaussian_loglik forms it: sum(((y - f)^2) * k) - c */
  const bbb_float *f = lw[m->n - 1].z, *yd = bbb_data(y);
  bbb_float *t = r + ny, kf = (bbb_float)(-0.5 / (sigma * sigma));
  for (int64_t i = 0; i < ny; i++) {
    r[i] = yd[i] - f[i];            /* sub */
    t[i] = (r[i] * r[i]) * kf;      /* square, then muls */
  }
  double c = (double)ny * (log(sigma) + 0.5 * log(2 * M_PI));   /* as the Lua forms it */
  bbb_float ll = (bbb_float)bbb_sum_floats(t, ny) + (bbb_float)(-c);   /* sum, then adds */
  bbb_float nll = -ll, pB = (bbb_float)(1.0 / (double)B), kw = (bbb_float)kl_weight;
  bbb_float total = m->bayes ? nll + kl * kw : nll;                      /* nll + kl * w */
  terms->nll = nll;
  terms->kl = m->bayes ? kl : 0;
  terms->loss = total * pB;                                              /* * 1 / B */

  /* backward: each op's gradient added to a new (zero) buffer */
  bbb_float gtot = 0 + 1.0f * pB;                  /* muls */
  bbb_float gnll = m->bayes ? gtot + 0.0f : gtot;  /* add */
  bbb_float gkl = 0 + (gtot + 0.0f) * kw;          /* add, then muls */
  bbb_float gs = 0 + (0 - gnll);                   /* neg, then adds */
  bbb_float gsq = 0 + (0 + gs) * kf;               /* sum, then muls */
  bbb_float *g = lw[m->n - 1].gz;
  for (int64_t i = 0; i < ny; i++) g[i] = -(0 + 2 * r[i] * gsq) + 0.0f;   /* square, then sub */

  for (int l = m->n - 1; l >= 0; l--) {
    const bbb_mlp_layer *L = &m->layer[l];
    int64_t o = n_out(L, m->bayes), ni = n_in(L, m->bayes), nw = o * ni;
    const bbb_float *xin = l ? lw[l - 1].h : bbb_data(x), *W = m->bayes ? lw[l].wb : bbb_data(L->w);
    int fw, fb;
    bbb_float *gw = m->bayes ? lw[l].gwb : bbb_grad_begin(L->w, &fw, &st);
    bbb_tensor *bt = bias_of(L, m->bayes);
    bbb_float *gb = !bt ? NULL : m->bayes ? lw[l].gwb + nw : bbb_grad_begin(bt, &fb, &st);
    if (st) return st;
    if (l > 0) {   /* linear's grad x, then relu's */
      bbb_gemm(0, 0, B, ni, o, g, W, 0.0f, gh);
      const bbb_float *zp = lw[l - 1].z, *mk = lw[l - 1].mask;
      bbb_float *gp = lw[l - 1].gz;
      if (m->layer[l - 1].dropout > 0)
        for (int64_t i = 0; i < B * ni; i++) gh[i] = gh[i] * mk[i] + 0.0f;   /* mul */
      for (int64_t i = 0; i < B * ni; i++) gp[i] = 0 + (zp[i] > 0 ? gh[i] : 0);
    }
    bbb_gemm(1, 0, o, ni, B, g, xin, 0.0f, gw);
    if (gb) {
      memset(gb, 0, (size_t)o * sizeof *gb);
      for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < o; j++) gb[j] += g[i * o + j];
    }
    if (m->bayes) {
      st = posterior_grad(L->wmu, L->wrho, lw[l].eps, lw[l].gwb, lw[l].kept, &L->prior, gkl);
      if (!st && L->bmu)
        st = posterior_grad(L->bmu, L->brho, lw[l].eps + nw, lw[l].gwb + nw, lw[l].kept + nw, &L->prior, gkl);
      if (st) return st;
    }
    if (l > 0) g = lw[l - 1].gz;
  }
  return bbb_interrupted() ? bbb_error(BBB_EINTR, "mlp: interrupted") : BBB_OK;
}
