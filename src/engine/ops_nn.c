/*
** ops_nn.c: matmul and linear on bbb_gemm (gemm.c), log_softmax, softmax, nll.
*/
#include <math.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/vmath.h"

static int need_2d(const bbb_tensor *t, const char *op, const char *what) {
  char s[96];
  if (t->ndim != 2)
    return bbb_error(BBB_ESHAPE, "%s: %s must be 2-d, got %s", op, what,
                     bbb_shape_str(t, s, sizeof s));
  return BBB_OK;
}

/* What a matmul node saves: the transpose flags. */
typedef struct { int ta, tb; } matmul_saved;

static int matmul_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = bbb_blas_room("matmul backward");
  if (st) return st;
  bbb_tensor *a = nd->in[0].t, *b = nd->in[1].t;
  const matmul_saved *sv = bbb_node_ctx(nd);
  int ta = sv->ta, tb = sv->tb;
  int64_t m = out->shape[0], n = out->shape[1], k = ta ? a->shape[0] : a->shape[1];
  bbb_float *ga = bbb_grad_of(a, &st), *gb = bbb_grad_of(b, &st);
  if (ga) {
    if (!ta) bbb_gemm(0, !tb, m, k, n, g, bbb_data(b), 1, ga);   /* g op(b)^T */
    else bbb_gemm(tb, 1, k, m, n, bbb_data(b), g, 1, ga);        /* op(b) g^T */
  }
  if (gb) {
    if (!tb) bbb_gemm(!ta, 0, k, n, m, bbb_data(a), g, 1, gb);   /* op(a)^T g */
    else bbb_gemm(1, ta, n, k, m, g, bbb_data(a), 1, gb);        /* g^T op(a) */
  }
  return st;
}

int bbb_matmul(bbb_tensor **out, bbb_tensor *a, bbb_tensor *b, int ta, int tb) {
  char s1[96], s2[96];
  *out = NULL;
  int st = need_2d(a, "matmul", "first operand");
  if (!st) st = need_2d(b, "matmul", "second operand");
  if (!st) st = bbb_blas_room("matmul");
  if (st) return st;
  int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  int64_t k2 = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (k != k2)
    return bbb_error(BBB_ESHAPE, "matmul: inner sizes differ: %s%s times %s%s", 
                     bbb_shape_str(a, s1, sizeof s1), ta ? "^T" : "",
                     bbb_shape_str(b, s2, sizeof s2), tb ? "^T" : "");
  int64_t shape[2] = { m, n };
  bbb_tensor *y = bbb_tensor_new(2, shape);
  if (!y) return bbb_errstatus();
  if (k == 0) memset(bbb_data(y), 0, (size_t)(m * n) * sizeof(bbb_float));
  else if (m * n > 0) bbb_gemm(ta, tb, m, n, k, bbb_data(a), bbb_data(b), 0, bbb_data(y));
  bbb_tensor *in[2] = { a, b };
  matmul_saved sv = { ta, tb };
  st = bbb_record(y, BBB_OP_MATMUL, 0, matmul_backward, 2, in, 3u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

void bbb_linear_forward(bbb_float *out, const bbb_float *x, const bbb_float *w, const bbb_float *b,
                        int64_t B, int64_t in, int64_t o) {
  for (int64_t r = 0; r < B; r++) {
    if (b) memcpy(out + r * o, b, (size_t)o * sizeof *out);
    else memset(out + r * o, 0, (size_t)o * sizeof *out);
  }
  if (B * o > 0 && in > 0) bbb_gemm(0, 1, B, o, in, x, w, 1, out);
}

void bbb_bias_grad(bbb_float *db, const bbb_float *dout, int64_t B, int64_t o) {
  for (int64_t r = 0; r < B; r++)
    for (int64_t j = 0; j < o; j++) db[j] += dout[r * o + j];
}

static int linear_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = bbb_blas_room("linear backward"), fx, fw, fb;
  if (st) return st;
  bbb_tensor *x = nd->in[0].t, *w = nd->in[1].t, *b = nd->in[2].t;
  int64_t B = x->shape[0], in = x->shape[1], o = w->shape[0];
  bbb_float *gx = bbb_grad_begin(x, &fx, &st), *gw = bbb_grad_begin(w, &fw, &st);
  bbb_float *gb = b ? bbb_grad_begin(b, &fb, &st) : NULL;
  /* a fresh buffer is written with beta = 0 instead of being zeroed first */
  if (gx) bbb_gemm(0, 0, B, in, o, g, bbb_data(w), fx ? 0.0f : 1.0f, gx);   /* g (B,o) w (o,in) */
  if (gw) bbb_gemm(1, 0, o, in, B, g, bbb_data(x), fw ? 0.0f : 1.0f, gw);   /* g^T (o,B) x (B,in) */
  if (gb) {
    if (fb) memset(gb, 0, (size_t)o * sizeof *gb);
    bbb_bias_grad(gb, g, B, o);
  }
  return st;
}

int bbb_linear(bbb_tensor **out, bbb_tensor *x, bbb_tensor *w, bbb_tensor *b) {
  char s1[96], s2[96];
  *out = NULL;
  int st = need_2d(x, "linear", "input");
  if (!st) st = need_2d(w, "linear", "weight");
  if (!st) st = bbb_blas_room("linear");
  if (st) return st;
  if (x->shape[1] != w->shape[1])
    return bbb_error(BBB_ESHAPE, "linear: input %s does not match weight %s "
                     "(input width must equal weight columns)",
                     bbb_shape_str(x, s1, sizeof s1), bbb_shape_str(w, s2, sizeof s2));
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return bbb_error(BBB_ESHAPE, "linear: bias %s does not match weight %s",
                     bbb_shape_str(b, s1, sizeof s1), bbb_shape_str(w, s2, sizeof s2));
  int64_t B = x->shape[0], o = w->shape[0], shape[2] = { B, o };
  bbb_tensor *y = bbb_tensor_new(2, shape);
  if (!y) return bbb_errstatus();
  bbb_linear_forward(bbb_data(y), bbb_data(x), bbb_data(w), b ? bbb_data(b) : NULL, B, x->shape[1], o);
  bbb_tensor *in[3] = { x, w, b };
  st = bbb_record(y, BBB_OP_LINEAR, 0, linear_backward, 3, in, 3u, NULL, 0, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* ---- softmax family over the last dimension ---- */

static bbb_float row_logsumexp(const bbb_float *x, int64_t c) {
  bbb_float m = -INFINITY;
  for (int64_t j = 0; j < c; j++) m = (x[j] > m || x[j] != x[j]) ? x[j] : m;
  if (isinf(m) || m != m) return m;
  float s = 0;
  #pragma omp simd reduction(+:s)
  for (int64_t j = 0; j < c; j++) s += bbb_expf(x[j] - m);
  return m + bbb_logf(s);
}

typedef struct { int log; int64_t c; const bbb_float *x; bbb_float *y; } softmax_ctx;

static void softmax_rows(void *p, int64_t lo, int64_t hi) {
  const softmax_ctx *u = p;
  for (int64_t r = lo; r < hi; r++) {
    const bbb_float *x = u->x + r * u->c;
    bbb_float *y = u->y + r * u->c, l = row_logsumexp(x, u->c);
    if (u->log) for (int64_t j = 0; j < u->c; j++) y[j] = x[j] - l;
    else for (int64_t j = 0; j < u->c; j++) y[j] = bbb_expf(x[j] - l);
  }
}

static int softmax_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t;
  bbb_float *gx = bbb_grad_of(x, &st);
  if (!gx) return st;
  int64_t c = x->ndim ? x->shape[x->ndim - 1] : 1, rows = c ? x->numel / c : 0;
  const bbb_float *y = bbb_data(out);
  for (int64_t r = 0; r < rows; r++) {
    const bbb_float *yr = y + r * c, *gr = g + r * c;
    bbb_float *gxr = gx + r * c;
    float s = 0;
    if (nd->op == BBB_OP_LOG_SOFTMAX) {   /* log_softmax: gx = g - softmax * sum(g) */
      for (int64_t j = 0; j < c; j++) s += gr[j];
      for (int64_t j = 0; j < c; j++) gxr[j] += gr[j] - bbb_expf(yr[j]) * s;
    } else {          /* softmax: gx = y * (g - <g, y>) */
      for (int64_t j = 0; j < c; j++) s += gr[j] * yr[j];
      for (int64_t j = 0; j < c; j++) gxr[j] += yr[j] * (gr[j] - s);
    }
  }
  return BBB_OK;
}

static int softmax_common(bbb_tensor **out, bbb_tensor *x, int log) {
  const char *op = log ? "log_softmax" : "softmax";
  char s[96];
  *out = NULL;
  if (x->ndim < 1)
    return bbb_error(BBB_ESHAPE, "%s: needs at least 1 dimension, got %s", op,
                     bbb_shape_str(x, s, sizeof s));
  bbb_tensor *y = bbb_tensor_new(x->ndim, x->shape);
  if (!y) return bbb_errstatus();
  int64_t c = x->shape[x->ndim - 1];
  softmax_ctx u = { log, c, bbb_data(x), bbb_data(y) };
  if (c > 0) bbb_parallel_for(x->numel / c, 1 + BBB_GRAIN_ROWS / c, softmax_rows, &u);
  if (bbb_interrupted()) {
    bbb_tensor_release(y);
    return bbb_error(BBB_EINTR, "%s: interrupted", op);
  }
  int st = bbb_record(y, log ? BBB_OP_LOG_SOFTMAX : BBB_OP_SOFTMAX, 0, softmax_backward, 1, &x,
                      BBB_SAVES_OUT, NULL, 0, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

int bbb_log_softmax(bbb_tensor **out, bbb_tensor *x) { return softmax_common(out, x, 1); }
int bbb_softmax(bbb_tensor **out, bbb_tensor *x) { return softmax_common(out, x, 0); }

/* What an nll node saves: the first class number and the reduction. */
typedef struct { int64_t base; int mean; } nll_saved;

static int nll_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *lp = nd->in[0].t, *lab = nd->in[1].t;
  bbb_float *gl = bbb_grad_of(lp, &st);
  if (!gl) return st;
  const nll_saved *sv = bbb_node_ctx(nd);
  int64_t B = lp->shape[0], C = lp->shape[1], base = sv->base;
  bbb_float scale = sv->mean ? g[0] / (bbb_float)B : g[0];
  for (int64_t r = 0; r < B; r++)
    gl[r * C + (int64_t)bbb_data(lab)[r] - base] -= scale;
  return BBB_OK;
}

int bbb_nll(bbb_tensor **out, bbb_tensor *logp, bbb_tensor *labels, int base, int mean) {
  char s1[96], s2[96];
  *out = NULL;
  int st = need_2d(logp, "nll", "log-probabilities");
  if (st) return st;
  int64_t B = logp->shape[0], C = logp->shape[1];
  if (labels->numel != B || labels->ndim > 2)
    return bbb_error(BBB_ESHAPE, "nll: %lld labels %s for %lld rows of %s",
                     (long long)labels->numel, bbb_shape_str(labels, s1, sizeof s1),
                     (long long)B, bbb_shape_str(logp, s2, sizeof s2));
  const bbb_float *l = bbb_data(labels), *p = bbb_data(logp);
  double total = 0;
  for (int64_t r = 0; r < B; r++) {
    bbb_float v = l[r];
    if (!(v >= base && v < base + C) || v != floorf(v))
      return bbb_error(BBB_EINDEX, "nll: label %g at row %lld is not a class in %d..%lld",
                       (double)v, (long long)(r + base), base, (long long)(C - 1 + base));
    total -= p[r * C + (int64_t)v - base];
  }
  bbb_tensor *y = bbb_tensor_new(0, NULL);
  if (!y) return bbb_errstatus();
  bbb_data(y)[0] = (bbb_float)(mean && B ? total / B : total);
  bbb_tensor *in[2] = { logp, labels };
  nll_saved sv = { base, mean };
  st = bbb_record(y, BBB_OP_NLL, 0, nll_backward, 2, in, 2u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}
