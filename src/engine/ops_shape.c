/*
** ops_shape.c: reshape, narrow, index_select, concat, transpose, copy,
** detach. Tensors are always contiguous, so reshape and narrow on the first
** dimension are views; the rest copy.
*/
#include <math.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/ops.h"

static int finish(bbb_tensor **out, bbb_tensor *y, bbb_op op, bbb_backward_fn fn,
                  int nin, bbb_tensor **in, const void *saved, size_t saved_size) {
  int st = bbb_record(y, op, 0, fn, nin, in, 0u, saved, saved_size, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

static int flat_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_float *gx = bbb_grad_of(nd->in[0].t, &st);
  if (gx) for (int64_t i = 0; i < out->numel; i++) gx[i] += g[i];
  return st;
}

int bbb_reshape(bbb_tensor **out, bbb_tensor *x, int ndim, const int64_t *shape) {
  char s[96];
  int64_t n;
  *out = NULL;
  int st = bbb_shape_check(ndim, shape, &n);
  if (st) return st;
  if (n != x->numel)
    return bbb_error(BBB_ESHAPE, "reshape: cannot view %s (%lld elements) as %lld elements",
                     bbb_shape_str(x, s, sizeof s), (long long)x->numel, (long long)n);
  bbb_tensor *y = bbb_tensor_view(x, ndim, shape, 0);
  if (!y) return bbb_errstatus();
  return finish(out, y, BBB_OP_RESHAPE, flat_backward, 1, &x, NULL, 0);
}

int bbb_copy(bbb_tensor **out, bbb_tensor *x) {
  *out = NULL;
  bbb_tensor *y = bbb_tensor_clone(x);
  if (!y) return bbb_errstatus();
  return finish(out, y, BBB_OP_COPY, flat_backward, 1, &x, NULL, 0);
}

int bbb_detach(bbb_tensor **out, bbb_tensor *x) {
  *out = bbb_tensor_view(x, x->ndim, x->shape, 0);
  return *out ? BBB_OK : bbb_errstatus();
}

/* x as (outer, d, inner) around dim. */
static void split_dims(const bbb_tensor *x, int dim, int64_t *outer, int64_t *inner) {
  *outer = 1; *inner = 1;
  for (int i = 0; i < dim; i++) *outer *= x->shape[i];
  for (int i = dim + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

/* What a narrow node saves: the dimension and the rows kept. */
typedef struct { int dim; int64_t start, len; } narrow_saved;

static int narrow_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t;
  bbb_float *gx = bbb_grad_of(x, &st);
  if (!gx) return st;
  const narrow_saved *sv = bbb_node_ctx(nd);
  int dim = sv->dim;
  int64_t start = sv->start, len = sv->len, outer, inner;
  split_dims(x, dim, &outer, &inner);
  for (int64_t o = 0; o < outer; o++) {
    bbb_float *dst = gx + (o * x->shape[dim] + start) * inner;
    const bbb_float *src = g + o * len * inner;
    for (int64_t i = 0; i < len * inner; i++) dst[i] += src[i];
  }
  return BBB_OK;
}

int bbb_narrow(bbb_tensor **out, bbb_tensor *x, int dim, int64_t start, int64_t len) {
  char s[96];
  *out = NULL;
  if (dim < 0 || dim >= x->ndim)
    return bbb_error(BBB_EINDEX, "narrow: dimension %d out of range for %s", dim + 1,
                     bbb_shape_str(x, s, sizeof s));
  if (start < 0 || len < 0 || start + len > x->shape[dim])
    return bbb_error(BBB_EINDEX, "narrow: rows %lld..%lld out of range 1..%lld of dimension "
                     "%d of %s", (long long)start + 1, (long long)(start + len),
                     (long long)x->shape[dim], dim + 1, bbb_shape_str(x, s, sizeof s));
  int64_t shape[BBB_MAXDIM], outer, inner;
  memcpy(shape, x->shape, sizeof shape);
  shape[dim] = len;
  split_dims(x, dim, &outer, &inner);
  bbb_tensor *y;
  if (outer == 1) {
    y = bbb_tensor_view(x, x->ndim, shape, start * inner);
  } else {
    y = bbb_tensor_new(x->ndim, shape);
    if (y)
      for (int64_t o = 0; o < outer; o++)
        memcpy(bbb_data(y) + o * len * inner, bbb_data(x) + (o * x->shape[dim] + start) * inner,
               (size_t)(len * inner) * sizeof(bbb_float));
  }
  if (!y) return bbb_errstatus();
  narrow_saved sv = { dim, start, len };
  return finish(out, y, BBB_OP_NARROW, narrow_backward, 1, &x, &sv, sizeof sv);
}

/* What an index_select node saves: the number of the first row. */
typedef struct { int64_t base; } index_select_saved;

static int index_select_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t, *idx = nd->in[1].t;
  bbb_float *gx = bbb_grad_of(x, &st);
  if (!gx) return st;
  int64_t row = x->shape[0] ? x->numel / x->shape[0] : 0;
  const index_select_saved *sv = bbb_node_ctx(nd);
  for (int64_t r = 0; r < idx->numel; r++) {
    bbb_float *dst = gx + ((int64_t)bbb_data(idx)[r] - sv->base) * row;
    for (int64_t j = 0; j < row; j++) dst[j] += g[r * row + j];
  }
  return BBB_OK;
}

int bbb_index_select(bbb_tensor **out, bbb_tensor *x, bbb_tensor *idx, int base) {
  char s[96];
  *out = NULL;
  if (x->ndim < 1)
    return bbb_error(BBB_ESHAPE, "index_select: needs at least 1 dimension, got %s",
                     bbb_shape_str(x, s, sizeof s));
  if (idx->ndim > 1)
    return bbb_error(BBB_ESHAPE, "index_select: indices must be 1-d, got %s",
                     bbb_shape_str(idx, s, sizeof s));
  int64_t rows = x->shape[0], row = rows ? x->numel / rows : 0;
  for (int64_t r = 0; r < idx->numel; r++) {
    bbb_float v = bbb_data(idx)[r];
    if (v != floorf(v))
      return bbb_error(BBB_EINDEX, "index_select: index %g at position %lld is not an integer",
                       (double)v, (long long)(r + base));
    if (!(v >= base && v < base + rows))
      return bbb_error(BBB_EINDEX, "index_select: index %g at position %lld out of range "
                       "%d..%lld", (double)v, (long long)(r + base), base,
                       (long long)(rows - 1 + base));
  }
  int64_t shape[BBB_MAXDIM];
  memcpy(shape, x->shape, sizeof shape);
  shape[0] = idx->numel;
  bbb_tensor *y = bbb_tensor_new(x->ndim, shape);
  if (!y) return bbb_errstatus();
  for (int64_t r = 0; r < idx->numel; r++)
    memcpy(bbb_data(y) + r * row, bbb_data(x) + ((int64_t)bbb_data(idx)[r] - base) * row,
           (size_t)row * sizeof(bbb_float));
  bbb_tensor *in[2] = { x, idx };
  index_select_saved sv = { base };
  int st = bbb_record(y, BBB_OP_INDEX_SELECT, 0, index_select_backward, 2, in, 2u, &sv, sizeof sv,
                      NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* What a concat node saves: the dimension joined along. */
typedef struct { int dim; } concat_saved;

static int concat_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  const concat_saved *sv = bbb_node_ctx(nd);
  int st = BBB_OK, dim = sv->dim;
  int64_t outer, inner, at = 0;
  split_dims(out, dim, &outer, &inner);
  for (int k = 0; k < nd->nin; k++) {
    bbb_tensor *x = nd->in[k].t;
    int64_t w = x->shape[dim] * inner;
    bbb_float *gx = bbb_grad_of(x, &st);
    if (gx)
      for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < w; i++) gx[o * w + i] += g[o * out->shape[dim] * inner + at + i];
    at += w;
  }
  return st;
}

int bbb_concat(bbb_tensor **out, bbb_tensor **xs, int n, int dim) {
  char s1[96], s2[96];
  *out = NULL;
  if (n < 1) return bbb_error(BBB_EARG, "cat: needs at least one tensor");
  bbb_tensor *x0 = xs[0];
  if (dim < 0 || dim >= x0->ndim)
    return bbb_error(BBB_EINDEX, "cat: dimension %d out of range for %s", dim + 1,
                     bbb_shape_str(x0, s1, sizeof s1));
  int64_t shape[BBB_MAXDIM], outer, inner;
  memcpy(shape, x0->shape, sizeof shape);
  shape[dim] = 0;
  for (int k = 0; k < n; k++) {
    int ok = xs[k]->ndim == x0->ndim;
    for (int d = 0; ok && d < x0->ndim; d++)
      if (d != dim && xs[k]->shape[d] != x0->shape[d]) ok = 0;
    if (!ok)
      return bbb_error(BBB_ESHAPE, "cat: tensor %d %s does not fit tensor 1 %s (all sizes "
                       "but dimension %d must agree)", k + 1, bbb_shape_str(xs[k], s1, sizeof s1),
                       bbb_shape_str(x0, s2, sizeof s2), dim + 1);
    shape[dim] += xs[k]->shape[dim];
  }
  bbb_tensor *y = bbb_tensor_new(x0->ndim, shape);
  if (!y) return bbb_errstatus();
  split_dims(y, dim, &outer, &inner);
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    int64_t w = xs[k]->shape[dim] * inner;
    for (int64_t o = 0; o < outer; o++)
      memcpy(bbb_data(y) + o * shape[dim] * inner + at, bbb_data(xs[k]) + o * w,
             (size_t)w * sizeof(bbb_float));
    at += w;
  }
  concat_saved sv = { dim };
  return finish(out, y, BBB_OP_CONCAT, concat_backward, n, xs, &sv, sizeof sv);
}

static void transpose2d(bbb_float *dst, const bbb_float *src, int64_t r, int64_t c, int acc) {
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) {
      if (acc) dst[j * r + i] += src[i * c + j];
      else dst[j * r + i] = src[i * c + j];
    }
}

static int transpose_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_float *gx = bbb_grad_of(nd->in[0].t, &st);
  if (gx) transpose2d(gx, g, out->shape[0], out->shape[1], 1);
  return st;
}

int bbb_transpose(bbb_tensor **out, bbb_tensor *x) {
  char s[96];
  *out = NULL;
  if (x->ndim != 2)
    return bbb_error(BBB_ESHAPE, "transpose: needs a 2-d tensor, got %s",
                     bbb_shape_str(x, s, sizeof s));
  int64_t shape[2] = { x->shape[1], x->shape[0] };
  bbb_tensor *y = bbb_tensor_new(2, shape);
  if (!y) return bbb_errstatus();
  transpose2d(bbb_data(y), bbb_data(x), x->shape[0], x->shape[1], 0);
  return finish(out, y, BBB_OP_TRANSPOSE, transpose_backward, 1, &x, NULL, 0);
}
