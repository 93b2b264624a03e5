/*
** ops_reduce.c: sum, mean, max, logsumexp and argmax over one dimension or
** all elements. A reduction sees x as (outer, d, inner) and writes
** (outer, inner); sums accumulate in double.
*/
#include <math.h>
#include <stdlib.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/vmath.h"

const char *const bbb_reduce_names[] = { "sum", "mean", "max", "logsumexp" };
_Static_assert(sizeof bbb_reduce_names / sizeof bbb_reduce_names[0] == BBB_REDUCE_COUNT,
               "bbb_reduce_names must name every bbb_reduce_op");

typedef struct { int64_t outer, d, inner; } rshape;

static int reduce_shape(const bbb_tensor *x, int dim, int keepdim, const char *op,
                        rshape *rs, int *nd, int64_t *shape) {
  char s[96];
  if (dim >= x->ndim)
    return bbb_error(BBB_EINDEX, "%s: dimension %d out of range for a %d-d tensor %s", op,
                     dim + 1, x->ndim, bbb_shape_str(x, s, sizeof s));
  if (dim < 0) {
    rs->outer = 1; rs->d = x->numel; rs->inner = 1;
    *nd = keepdim ? x->ndim : 0;
    for (int i = 0; i < *nd; i++) shape[i] = 1;
  } else {
    rs->outer = 1; rs->inner = 1; rs->d = x->shape[dim];
    for (int i = 0; i < dim; i++) rs->outer *= x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++) rs->inner *= x->shape[i];
    *nd = 0;
    for (int i = 0; i < x->ndim; i++) {
      if (i != dim) shape[(*nd)++] = x->shape[i];
      else if (keepdim) shape[(*nd)++] = 1;
    }
  }
  if (rs->d == 0 && (dim < 0 ? 1 : rs->outer * rs->inner) > 0)
    return bbb_error(BBB_ESHAPE, "%s: reduction over an empty dimension of %s", op,
                     bbb_shape_str(x, s, sizeof s));
  return BBB_OK;
}

typedef struct { int op; rshape rs; const bbb_float *x; bbb_float *y; } reduce_ctx;

static double sum_contig(const bbb_float *x, int64_t n) {
  double s = 0;   /* memory-bound: double lanes cost nothing and keep 1e6-sums exact to ~1e-9 */
  #pragma omp simd reduction(+:s)
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

static bbb_float max_contig(const bbb_float *x, int64_t n) {
  bbb_float m = -INFINITY;
  int nan = 0;
  #pragma omp simd reduction(max:m) reduction(|:nan)
  for (int64_t i = 0; i < n; i++) { m = x[i] > m ? x[i] : m; nan |= x[i] != x[i]; }
  return nan ? NAN : m;
}

/* One output row of the (outer, inner) result: o is the outer index. */
static void reduce_outer(const reduce_ctx *u, int64_t o) {
  const rshape *rs = &u->rs;
  const bbb_float *x = u->x + o * rs->d * rs->inner;
  bbb_float *y = u->y + o * rs->inner;
  for (int64_t j = 0; j < rs->inner; j++) {
    if (rs->inner == 1 && u->op != BBB_LOGSUMEXP) {
      y[0] = u->op == BBB_MAX ? max_contig(x, rs->d)
           : (bbb_float)(sum_contig(x, rs->d) / (u->op == BBB_MEAN ? rs->d : 1));
      return;
    }
    bbb_float m = -INFINITY;
    for (int64_t k = 0; k < rs->d; k++) {
      bbb_float v = x[k * rs->inner + j];
      m = (v > m || v != v) ? v : m;
    }
    if (u->op == BBB_MAX) { y[j] = m; continue; }
    double s = 0;
    if (u->op == BBB_LOGSUMEXP) {
      if (isinf(m) || m != m) { y[j] = m; continue; }
      for (int64_t k = 0; k < rs->d; k++) s += bbb_expf(x[k * rs->inner + j] - m);
      y[j] = m + (bbb_float)log(s);
    } else {
      for (int64_t k = 0; k < rs->d; k++) s += x[k * rs->inner + j];
      y[j] = (bbb_float)(s / (u->op == BBB_MEAN ? rs->d : 1));
    }
  }
}

static void reduce_range(void *c, int64_t lo, int64_t hi) {
  for (int64_t o = lo; o < hi; o++) reduce_outer(c, o);
}

static double sum_chunk(const void *x, int64_t lo, int64_t hi) {
  return sum_contig((const bbb_float *)x + lo, hi - lo);
}

/* Below this many elements a sum is one pass: the threads would cost more
** than they save. */
#define SUM_PARALLEL_MIN 65536

double bbb_sum_floats(const bbb_float *x, int64_t n) {
  return n >= SUM_PARALLEL_MIN ? bbb_parallel_sum(n, sum_chunk, x) : sum_contig(x, n);
}

void bbb_sum_backward(bbb_float *dx, bbb_float dout, int64_t n, int64_t stride) {
  for (int64_t k = 0; k < n; k++) dx[k * stride] += dout;
}

static int64_t argmax_at(const bbb_float *x, const rshape *rs, int64_t o, int64_t j) {
  const bbb_float *p = x + o * rs->d * rs->inner + j;
  int64_t best = 0;
  bbb_float m = p[0];
  for (int64_t k = 1; k < rs->d && m == m; k++) {
    bbb_float v = p[k * rs->inner];
    if (v > m || v != v) { m = v; best = k; }
  }
  return best;
}

/* What a reduction node saves: the op and x seen as (outer, d, inner). */
typedef struct { int op; rshape rs; } reduce_saved;

static int reduce_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t;
  bbb_float *gx = bbb_grad_of(x, &st);
  if (!gx) return st;
  const reduce_saved *sv = bbb_node_ctx(nd);
  rshape rs = sv->rs;
  int op = sv->op;
  const bbb_float *xd = bbb_data(x), *y = bbb_data(out);
  for (int64_t o = 0; o < rs.outer; o++)
    for (int64_t j = 0; j < rs.inner; j++) {
      bbb_float go = g[o * rs.inner + j];
      int64_t base = o * rs.d * rs.inner + j;
      if (op == BBB_MAX) {
        gx[base + argmax_at(xd, &rs, o, j) * rs.inner] += go;
      } else if (op == BBB_LOGSUMEXP) {
        bbb_float yo = y[o * rs.inner + j];
        for (int64_t k = 0; k < rs.d; k++)
          gx[base + k * rs.inner] += go * bbb_expf(xd[base + k * rs.inner] - yo);
      } else {
        if (op == BBB_MEAN) go /= (bbb_float)rs.d;
        bbb_sum_backward(gx + base, go, rs.d, rs.inner);
      }
    }
  return BBB_OK;
}

int bbb_reduce(bbb_tensor **out, int op, bbb_tensor *x, int dim, int keepdim) {
  rshape rs = { 0, 0, 0 }; int nd = 0; int64_t shape[BBB_MAXDIM];
  *out = NULL;
  if (op < 0 || op >= BBB_REDUCE_COUNT) return bbb_error(BBB_EARG, "unknown reduction %d", op);
  int st = reduce_shape(x, dim, keepdim, bbb_reduce_names[op], &rs, &nd, shape);
  if (st) return st;
  bbb_tensor *y = bbb_tensor_new(nd, shape);
  if (!y) return bbb_errstatus();
  reduce_ctx u = { op, rs, bbb_data(x), bbb_data(y) };
  if (rs.outer == 1 && rs.inner == 1 && (op == BBB_SUM || op == BBB_MEAN)) {
    double total = bbb_sum_floats(bbb_data(x), rs.d);
    bbb_data(y)[0] = (bbb_float)(op == BBB_MEAN ? total / rs.d : total);
  } else {
    bbb_parallel_for(rs.outer, 1 + BBB_GRAIN_REDUCE / (rs.d * rs.inner + 1), reduce_range, &u);
  }
  if (bbb_interrupted()) {
    bbb_tensor_release(y);
    return bbb_error(BBB_EINTR, "%s: interrupted", bbb_reduce_names[op]);
  }
  unsigned saves = (op == BBB_MAX || op == BBB_LOGSUMEXP) ? 1u | BBB_SAVES_OUT : 0u;
  reduce_saved sv = { op, rs };
  st = bbb_record(y, BBB_OP_REDUCE, op, reduce_backward, 1, &x, saves, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

int bbb_argmax(bbb_tensor **out, bbb_tensor *x, int dim, int keepdim, int base) {
  rshape rs = { 0, 0, 0 }; int nd = 0; int64_t shape[BBB_MAXDIM];
  *out = NULL;
  int st = reduce_shape(x, dim, keepdim, "argmax", &rs, &nd, shape);
  if (st) return st;
  bbb_tensor *y = bbb_tensor_new(nd, shape);
  if (!y) return bbb_errstatus();
  for (int64_t o = 0; o < rs.outer; o++)
    for (int64_t j = 0; j < rs.inner; j++)
      bbb_data(y)[o * rs.inner + j] = (bbb_float)(argmax_at(bbb_data(x), &rs, o, j) + base);
  *out = y;
  return BBB_OK;
}
