/*
** ops_elem.c: elementwise ops. Unary ops (with up to two scalar parameters)
** run as vectorised loops over chunks split across threads; binary ops follow
** NumPy broadcasting, iterating rows of the output's last dimension.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/vmath.h"

const char *const bbb_unary_names[] = {
  "neg", "exp", "log", "log1p", "softplus", "sigmoid", "tanh", "relu", "sqrt",
  "square", "abs", "pow", "clamp", "add", "mul", "sub", "div", "gt", "lt"
};

const char *const bbb_binary_names[] = {
  "add", "sub", "mul", "div", "maximum", "minimum", "logaddexp"
};
_Static_assert(sizeof bbb_unary_names / sizeof bbb_unary_names[0] == BBB_UNARY_COUNT,
               "bbb_unary_names must name every bbb_unary_op");
_Static_assert(sizeof bbb_binary_names / sizeof bbb_binary_names[0] == BBB_BINARY_COUNT,
               "bbb_binary_names must name every bbb_binary_op");

/* ---- unary ---- */

/* The kernels that other paths share (ops.h); the ops below call them on
** their threads' shares. */
void bbb_neg_forward(bbb_float *y, const bbb_float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = -x[i];
}
void bbb_neg_backward(bbb_float *dx, const bbb_float *dout, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] -= dout[i];
}
void bbb_adds_forward(bbb_float *y, const bbb_float *x, bbb_float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] + s;
}
void bbb_adds_backward(bbb_float *dx, const bbb_float *dout, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] += dout[i];
}
void bbb_muls_forward(bbb_float *y, const bbb_float *x, bbb_float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}
void bbb_muls_backward(bbb_float *dx, const bbb_float *dout, bbb_float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * s;
}
void bbb_square_forward(bbb_float *y, const bbb_float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
}
void bbb_square_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] += 2 * x[i] * dout[i];
}
void bbb_relu_forward(bbb_float *y, const bbb_float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = !(x[i] <= 0) ? x[i] : 0;   /* NaN passes, as it does in every other op */
}
void bbb_relu_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] += x[i] > 0 ? dout[i] : 0;
}

typedef struct {
  int op;
  bbb_float p0, p1;
  bbb_float *y;
  const bbb_float *x, *g;
  bbb_float *gx;
  int fresh;            /* backward: gx is a new buffer, zeroed here share by share */
} unary_ctx;

static void unary_forward_range(void *c, int64_t lo, int64_t hi) {
  const unary_ctx *u = c;
  const bbb_float *x = u->x + lo;
  bbb_float *y = u->y + lo, p0 = u->p0, p1 = u->p1;
  int64_t n = hi - lo;
  switch (u->op) {
  case BBB_NEG:      bbb_neg_forward(y, x, n); break;
  case BBB_EXP:      for (int64_t i = 0; i < n; i++) y[i] = bbb_expf(x[i]); break;
  case BBB_LOG:      for (int64_t i = 0; i < n; i++) y[i] = bbb_logf(x[i]); break;
  case BBB_LOG1P:    for (int64_t i = 0; i < n; i++) y[i] = bbb_log1pf(x[i]); break;
  case BBB_SOFTPLUS: for (int64_t i = 0; i < n; i++) y[i] = bbb_softplusf(x[i]); break;
  case BBB_SIGMOID:  for (int64_t i = 0; i < n; i++) y[i] = bbb_sigmoidf(x[i]); break;
  case BBB_TANH:     for (int64_t i = 0; i < n; i++) y[i] = bbb_tanhf(x[i]); break;
  case BBB_RELU:     bbb_relu_forward(y, x, n); break;
  case BBB_SQRT:     for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
  case BBB_SQUARE:   bbb_square_forward(y, x, n); break;
  case BBB_ABS:      for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]); break;
  case BBB_POWS:
    if (p0 == 2) bbb_square_forward(y, x, n);
    else for (int64_t i = 0; i < n; i++) y[i] = powf(x[i], p0);
    break;
  case BBB_CLAMP:
    for (int64_t i = 0; i < n; i++) {
      bbb_float v = x[i] < p0 ? p0 : x[i];
      y[i] = v > p1 ? p1 : v;
    }
    break;
  case BBB_ADDS:  bbb_adds_forward(y, x, p0, n); break;
  case BBB_MULS:  bbb_muls_forward(y, x, p0, n); break;
  case BBB_RSUBS: for (int64_t i = 0; i < n; i++) y[i] = p0 - x[i]; break;
  case BBB_RDIVS: for (int64_t i = 0; i < n; i++) y[i] = p0 / x[i]; break;
  case BBB_GTS:   for (int64_t i = 0; i < n; i++) y[i] = x[i] > p0 ? 1.0f : 0.0f; break;
  case BBB_LTS:   for (int64_t i = 0; i < n; i++) y[i] = x[i] < p0 ? 1.0f : 0.0f; break;
  }
}

/* gx += g * dy/dx, from x and the saved output y. A fresh gx is zeroed a
** share at a time, just before the share is added to (while it is in
** cache), rather than in a pass of its own first. */
static void unary_backward_range(void *c, int64_t lo, int64_t hi) {
  const unary_ctx *u = c;
  const bbb_float *x = u->x + lo, *y = u->y + lo, *g = u->g + lo;
  bbb_float *gx = u->gx + lo, p0 = u->p0, p1 = u->p1;
  int64_t n = hi - lo;
  if (u->fresh) memset(gx, 0, (size_t)n * sizeof *gx);
  switch (u->op) {
  case BBB_NEG:      bbb_neg_backward(gx, g, n); break;
  case BBB_EXP:      for (int64_t i = 0; i < n; i++) gx[i] += g[i] * y[i]; break;
  case BBB_LOG:      for (int64_t i = 0; i < n; i++) gx[i] += g[i] / x[i]; break;
  case BBB_LOG1P:    for (int64_t i = 0; i < n; i++) gx[i] += g[i] / (1 + x[i]); break;
  case BBB_SOFTPLUS: for (int64_t i = 0; i < n; i++) gx[i] += g[i] * bbb_sigmoidf(x[i]); break;
  case BBB_SIGMOID:  for (int64_t i = 0; i < n; i++) gx[i] += g[i] * y[i] * (1 - y[i]); break;
  case BBB_TANH:     for (int64_t i = 0; i < n; i++) gx[i] += g[i] * (1 - y[i] * y[i]); break;
  case BBB_RELU:     bbb_relu_backward(gx, g, x, n); break;
  case BBB_SQRT:     for (int64_t i = 0; i < n; i++) gx[i] += g[i] * 0.5f / y[i]; break;
  case BBB_SQUARE:   bbb_square_backward(gx, g, x, n); break;
  case BBB_ABS:
    for (int64_t i = 0; i < n; i++) gx[i] += x[i] > 0 ? g[i] : x[i] < 0 ? -g[i] : 0;
    break;
  case BBB_POWS:
    for (int64_t i = 0; i < n; i++) gx[i] += g[i] * p0 * powf(x[i], p0 - 1);
    break;
  case BBB_CLAMP:
    for (int64_t i = 0; i < n; i++) gx[i] += (x[i] >= p0 && x[i] <= p1) ? g[i] : 0;
    break;
  case BBB_ADDS:  bbb_adds_backward(gx, g, n); break;
  case BBB_MULS:  bbb_muls_backward(gx, g, p0, n); break;
  case BBB_RSUBS: bbb_neg_backward(gx, g, n); break;   /* p0 - x: the gradient of -x */
  case BBB_RDIVS: for (int64_t i = 0; i < n; i++) gx[i] -= g[i] * y[i] / x[i]; break;
  case BBB_GTS: case BBB_LTS: break;   /* piecewise constant */
  }
}

/* What a unary node saves: the op and its scalar parameters. */
typedef struct { int op; double p0, p1; } unary_saved;

/* What a binary node saves: the op. */
typedef struct { int op; } binary_saved;

static int unary_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t;
  const unary_saved *sv = bbb_node_ctx(nd);
  int fresh;
  unary_ctx u = { sv->op, (bbb_float)sv->p0, (bbb_float)sv->p1,
                  bbb_data(out), bbb_data(x), g, bbb_grad_begin(x, &fresh, &st), 0 };
  u.fresh = fresh;
  if (!u.gx) return st;
  bbb_parallel_for(x->numel, BBB_GRAIN_ELEM, unary_backward_range, &u);
  /* an interrupt may have cut the loop short: no share of a new buffer is left unwritten */
  if (fresh && bbb_interrupted()) memset(u.gx, 0, (size_t)x->numel * sizeof *u.gx);
  return st;
}

int bbb_unary(bbb_tensor **out, int op, bbb_tensor *x, double p0, double p1) {
  *out = NULL;
  if (op < 0 || op >= BBB_UNARY_COUNT) return bbb_error(BBB_EARG, "unknown unary op %d", op);
  if (op == BBB_CLAMP && !(p0 <= p1))
    return bbb_error(BBB_EARG, "clamp: min %g is greater than max %g", p0, p1);
  bbb_tensor *y = bbb_tensor_new(x->ndim, x->shape);
  if (!y) return bbb_errstatus();
  unary_ctx u = { op, (bbb_float)p0, (bbb_float)p1, bbb_data(y), bbb_data(x), NULL, NULL, 0 };
  bbb_parallel_for(x->numel, BBB_GRAIN_ELEM, unary_forward_range, &u);
  if (bbb_interrupted()) {
    bbb_tensor_release(y);
    return bbb_error(BBB_EINTR, "%s: interrupted", bbb_unary_names[op]);
  }
  /* Every backward reads x or y; saving both keeps the check simple. */
  unary_saved sv = { op, p0, p1 };
  int st = bbb_record(y, BBB_OP_UNARY, op, unary_backward, 1, &x, 1u | BBB_SAVES_OUT,
                      &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* ---- binary with broadcasting ---- */

typedef struct {
  int nd;
  int64_t shape[BBB_MAXDIM];
  int64_t sa[BBB_MAXDIM], sb[BBB_MAXDIM];   /* element strides, 0 where broadcast */
  int64_t numel, inner, rows;
} bcast;

static int bcast_init(bcast *bc, const bbb_tensor *a, const bbb_tensor *b, const char *op) {
  char s1[96], s2[96];
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  int64_t stra = 1, strb = 1;
  bc->nd = nd;
  bc->numel = 1;
  for (int d = nd - 1; d >= 0; d--) {
    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t ea = da >= 0 ? a->shape[da] : 1, eb = db >= 0 ? b->shape[db] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      return bbb_error(BBB_ESHAPE, "%s: shapes %s and %s cannot be broadcast", op,
                       bbb_shape_str(a, s1, sizeof s1), bbb_shape_str(b, s2, sizeof s2));
    bc->shape[d] = ea == 1 ? eb : ea;
    bc->sa[d] = ea == 1 ? 0 : stra;
    bc->sb[d] = eb == 1 ? 0 : strb;
    stra *= ea; strb *= eb;
    bc->numel *= bc->shape[d];
  }
  bc->inner = nd ? bc->shape[nd - 1] : 1;
  bc->rows = bc->inner ? bc->numel / bc->inner : 0;
  return BBB_OK;
}

/* Offsets of row r (an index over all but the last dimension) in a and b. */
static void bcast_row(const bcast *bc, int64_t r, int64_t *oa, int64_t *ob) {
  int64_t a = 0, b = 0;
  for (int d = bc->nd - 2; d >= 0; d--) {
    int64_t k = r % bc->shape[d];
    r /= bc->shape[d];
    a += k * bc->sa[d];
    b += k * bc->sb[d];
  }
  *oa = a; *ob = b;
}

static inline bbb_float logaddexpf(bbb_float x, bbb_float z) {
  bbb_float m = x > z ? x : z;
  return isinf(m) ? m : m + bbb_log1pf(bbb_expf(-fabsf(x - z)));
}

/* One output row; sa, sb are 0 (broadcast) or 1. */
#define BINARY_ROW(expr) do {                                                  \
    if (sa && sb) for (int64_t i = 0; i < n; i++) { bbb_float x = a[i], z = b[i]; y[i] = (expr); } \
    else if (sa) { bbb_float z = b[0]; for (int64_t i = 0; i < n; i++) { bbb_float x = a[i]; y[i] = (expr); } } \
    else if (sb) { bbb_float x = a[0]; for (int64_t i = 0; i < n; i++) { bbb_float z = b[i]; y[i] = (expr); } } \
    else { bbb_float x = a[0], z = b[0], v = (expr); for (int64_t i = 0; i < n; i++) y[i] = v; } \
  } while (0)

static void binary_row(int op, bbb_float *y, const bbb_float *a, int64_t sa,
                       const bbb_float *b, int64_t sb, int64_t n) {
  switch (op) {
  case BBB_ADD: BINARY_ROW(x + z); break;
  case BBB_SUB: BINARY_ROW(x - z); break;
  case BBB_MUL: BINARY_ROW(x * z); break;
  case BBB_DIV: BINARY_ROW(x / z); break;
  case BBB_MAXIMUM: BINARY_ROW(x >= z || x != x ? x : z); break;
  case BBB_MINIMUM: BINARY_ROW(x <= z || x != x ? x : z); break;
  case BBB_LOGADDEXP: BINARY_ROW(logaddexpf(x, z)); break;
  }
}

void bbb_add_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n) {
  binary_row(BBB_ADD, y, a, 1, b, 1, n);
}
void bbb_sub_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n) {
  binary_row(BBB_SUB, y, a, 1, b, 1, n);
}
void bbb_mul_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n) {
  binary_row(BBB_MUL, y, a, 1, b, 1, n);
}

typedef struct { int op; const bcast *bc; bbb_float *y; const bbb_float *a, *b; } binary_ctx;

static void binary_forward_rows(void *c, int64_t lo, int64_t hi) {
  const binary_ctx *u = c;
  const bcast *bc = u->bc;
  int64_t sa = bc->nd ? bc->sa[bc->nd - 1] : 1, sb = bc->nd ? bc->sb[bc->nd - 1] : 1;
  for (int64_t r = lo; r < hi; r++) {
    int64_t oa, ob;
    bcast_row(bc, r, &oa, &ob);
    binary_row(u->op, u->y + r * bc->inner, u->a + oa, sa, u->b + ob, sb, bc->inner);
  }
}

static void binary_forward_flat(void *c, int64_t lo, int64_t hi) {
  const binary_ctx *u = c;
  binary_row(u->op, u->y + lo, u->a + lo, 1, u->b + lo, 1, hi - lo);
}

/* d out / d (side ? b : a) times g, for one row, into t. */
static void binary_grad_row(int op, int side, bbb_float *t, const bbb_float *g,
                            const bbb_float *y, const bbb_float *a, int64_t sa,
                            const bbb_float *b, int64_t sb, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    bbb_float x = a[i * sa], z = b[i * sb], v;
    switch (op) {
    case BBB_ADD: v = g[i]; break;
    case BBB_SUB: v = side ? -g[i] : g[i]; break;
    case BBB_MUL: v = g[i] * (side ? x : z); break;
    case BBB_DIV: v = side ? -g[i] * x / (z * z) : g[i] / z; break;
    case BBB_MAXIMUM: v = (side ? !(x >= z) : x >= z) ? g[i] : 0; break;
    case BBB_MINIMUM: v = (side ? !(x <= z) : x <= z) ? g[i] : 0; break;
    default: v = g[i] * bbb_expf((side ? z : x) - y[i]); break;   /* logaddexp */
    }
    t[i] = v;
  }
}

/* Same shapes, add, sub or mul: one side's gradient. Each element gets the
** same operations as in the row loop below (the product rounded before it
** is added, hence no contraction; a fresh buffer gets v + 0, as 0 + v
** would), so the bits are those of that loop on any thread count. */
void bbb_add_backward(bbb_float *dx, const bbb_float *dout, int64_t n, int fresh) {
  if (fresh) for (int64_t i = 0; i < n; i++) dx[i] = dout[i] + 0.0f;
  else for (int64_t i = 0; i < n; i++) dx[i] += dout[i];
}

void bbb_sub_backward(bbb_float *dx, const bbb_float *dout, int64_t n, int fresh) {
  if (fresh) for (int64_t i = 0; i < n; i++) dx[i] = -dout[i] + 0.0f;
  else for (int64_t i = 0; i < n; i++) dx[i] += -dout[i];
}

__attribute__((optimize("fp-contract=off")))
void bbb_mul_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *other, int64_t n,
                      int fresh) {
  if (fresh) for (int64_t i = 0; i < n; i++) dx[i] = dout[i] * other[i] + 0.0f;
  else for (int64_t i = 0; i < n; i++) { bbb_float v = dout[i] * other[i]; dx[i] += v; }
}

/* The same, over [lo, hi): a thread's share of the elements. */
typedef struct { int op, side, fresh; bbb_float *gt; const bbb_float *g, *other; } flat_grad_ctx;

static void flat_grad_range(void *c, int64_t lo, int64_t hi) {
  const flat_grad_ctx *u = c;
  bbb_float *gt = u->gt + lo;
  const bbb_float *g = u->g + lo;
  if (u->op == BBB_MUL) bbb_mul_backward(gt, g, u->other + lo, hi - lo, u->fresh);
  else if (u->op == BBB_SUB && u->side) bbb_sub_backward(gt, g, hi - lo, u->fresh);
  else bbb_add_backward(gt, g, hi - lo, u->fresh);
}

static int binary_backward_flat(int op, bbb_tensor *a, bbb_tensor *b, const bbb_float *g) {
  int st = BBB_OK;
  for (int side = 0; side < 2 && !st; side++) {
    int fresh;
    bbb_float *gt = bbb_grad_begin(side ? b : a, &fresh, &st);
    if (!gt) continue;
    flat_grad_ctx u = { op, side, fresh, gt, g, bbb_data(side ? a : b) };
    bbb_parallel_for(a->numel, BBB_GRAIN_ELEM, flat_grad_range, &u);
    /* an interrupt may have cut the loop short: no share of a new buffer is left unwritten */
    if (fresh && bbb_interrupted()) memset(gt, 0, (size_t)a->numel * sizeof *gt);
  }
  return st;
}

static int binary_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  bbb_tensor *a = nd->in[0].t, *b = nd->in[1].t;
  bcast bc;
  const binary_saved *sv = bbb_node_ctx(nd);
  if (bbb_same_shape(a, b) && (sv->op == BBB_ADD || sv->op == BBB_SUB || sv->op == BBB_MUL))
    return binary_backward_flat(sv->op, a, b, g);
  int st = bcast_init(&bc, a, b, bbb_binary_names[sv->op]);
  if (st) return st;
  int64_t sa = bc.nd ? bc.sa[bc.nd - 1] : 1, sb = bc.nd ? bc.sb[bc.nd - 1] : 1;
  bbb_float *tmp = malloc((size_t)(bc.inner > 0 ? bc.inner : 1) * sizeof *tmp);
  if (!tmp) return bbb_error(BBB_EMEM, "%s backward: out of memory", bbb_binary_names[sv->op]);
  for (int side = 0; side < 2 && !st; side++) {
    bbb_tensor *t = side ? b : a;
    bbb_float *gt = bbb_grad_of(t, &st);
    int64_t s = side ? sb : sa;
    if (!gt) continue;
    for (int64_t r = 0; r < bc.rows; r++) {
      int64_t oa, ob, off = r * bc.inner;
      bcast_row(&bc, r, &oa, &ob);
      binary_grad_row(sv->op, side, tmp, g + off, bbb_data(out) + off,
                      bbb_data(a) + oa, sa, bbb_data(b) + ob, sb, bc.inner);
      bbb_float *dst = gt + (side ? ob : oa);
      if (s) for (int64_t i = 0; i < bc.inner; i++) dst[i] += tmp[i];
      else {
        bbb_float acc = 0;
        for (int64_t i = 0; i < bc.inner; i++) acc += tmp[i];
        dst[0] += acc;
      }
    }
  }
  free(tmp);
  return st;
}

int bbb_binary(bbb_tensor **out, int op, bbb_tensor *a, bbb_tensor *b) {
  bcast bc;
  *out = NULL;
  if (op < 0 || op >= BBB_BINARY_COUNT) return bbb_error(BBB_EARG, "unknown binary op %d", op);
  int st = bcast_init(&bc, a, b, bbb_binary_names[op]);
  if (st) return st;
  bbb_tensor *y = bbb_tensor_new(bc.nd, bc.shape);
  if (!y) return bbb_errstatus();
  binary_ctx u = { op, &bc, bbb_data(y), bbb_data(a), bbb_data(b) };
  if (bbb_same_shape(a, b))
    bbb_parallel_for(bc.numel, BBB_GRAIN_ELEM, binary_forward_flat, &u);
  else
    bbb_parallel_for(bc.rows, 1 + BBB_GRAIN_ELEM / (bc.inner ? bc.inner : 1), binary_forward_rows, &u);
  if (bbb_interrupted()) {
    bbb_tensor_release(y);
    return bbb_error(BBB_EINTR, "%s: interrupted", bbb_binary_names[op]);
  }
  bbb_tensor *in[2] = { a, b };
  binary_saved sv = { op };
  unsigned saves = (op == BBB_ADD || op == BBB_SUB) ? 0u : 3u;
  if (op == BBB_LOGADDEXP) saves |= BBB_SAVES_OUT;
  st = bbb_record(y, BBB_OP_BINARY, op, binary_backward, 2, in, saves, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* ---- dropout's mask ---- */

/* The threshold pass, in place over the uniform numbers. */
typedef struct { bbb_float *u, p, keep; } mask_ctx;

static void mask_range(void *c, int64_t lo, int64_t hi) {
  const mask_ctx *m = c;
  bbb_float *u = m->u, p = m->p, keep = m->keep;
  for (int64_t i = lo; i < hi; i++) u[i] = u[i] > p ? keep : 0.0f;
}

void bbb_dropout_mask(bbb_float *mask, bbb_rng *g, int64_t n, double p) {
  bbb_rng_uniform(g, mask, n, 0, 1);
  mask_ctx m = { mask, (bbb_float)p, (bbb_float)(1 / (1 - p)) };
  bbb_parallel_for(n, BBB_GRAIN_ELEM, mask_range, &m);
}
