/*
** ops_conv.c: conv2d by im2col and the sgemm the dense layers use, max and
** average pooling. NCHW tensors, PyTorch's F.conv2d conventions.
**
** The column buffer of a whole batch is (Cin kH kW) times the input: tens
** of megabytes for a 28x28 batch of 128. So the batch is walked in tiles of
** T images whose buffers fit under a cap (bbb_conv_workspace, per thread),
** and each tile is one GEMM per group: large enough for OpenBLAS to run at
** speed, small enough to stay in cache. The threads take whole tiles, each
** with one-thread GEMMs, and the weight gradient's tile parts are added in
** tile order: OpenBLAS splitting one GEMM over two threads changes the last
** bits, and this way no number depends on the thread count.
*/
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "ops.h"
#include "parallel.h"

/* 4 MiB per thread: tiles of about 20 images for LeNet's first layer, where
** a batch of 128 would take 10 MB of columns untiled. */
static int64_t workspace_cap = (int64_t)4 << 20;

int64_t bbb_conv_workspace(int64_t bytes) {
  int64_t old = workspace_cap;
  if (bytes > 0) workspace_cap = bytes;
  return old;
}

/* c (m, n) = op(a) op(b) + beta c, row-major contiguous (as in ops_nn.c). */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const bbb_float *a,
                 const bbb_float *b, float beta, bbb_float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n,
              beta, c, (int)n);
}

/* One convolution's sizes. */
typedef struct {
  int64_t B, C, H, W;        /* input (B, C, H, W) */
  int64_t O, kh, kw;         /* weight (O, C / G, kh, kw) */
  int64_t oh, ow;            /* output plane */
  int64_t G, Cg, Og;         /* groups; input and output channels per group */
  int64_t K, P;              /* column rows Cg kh kw; output pixels oh ow */
  int64_t T;                 /* images per tile */
  bbb_conv_opts o;
} geom;

/* Output length of one dimension, or 0 when the dilated kernel is larger
** than the padded input. */
static int64_t out_len(int64_t n, int64_t k, int s, int p, int d) {
  int64_t span = (int64_t)d * (k - 1) + 1;
  return n + 2 * p < span ? 0 : (n + 2 * p - span) / s + 1;
}

static int check_opts(const bbb_conv_opts *o, const char *op) {
  for (int i = 0; i < 2; i++) {
    if (o->stride[i] < 1)
      return bbb_error(BBB_EARG, "%s: stride must be >= 1, got %d", op, o->stride[i]);
    if (o->pad[i] < 0)
      return bbb_error(BBB_EARG, "%s: padding must be >= 0, got %d", op, o->pad[i]);
    if (o->dil[i] < 1)
      return bbb_error(BBB_EARG, "%s: dilation must be >= 1, got %d", op, o->dil[i]);
  }
  return BBB_OK;
}

/* The output plane of a kernel kh x kw over x, with the error that names
** what does not fit. */
static int plane_of(const bbb_tensor *x, int64_t kh, int64_t kw, const bbb_conv_opts *o,
                    const char *op, int64_t *oh, int64_t *ow) {
  char s[96];
  if (x->shape[2] == 0 || x->shape[3] == 0)
    return bbb_error(BBB_ESHAPE, "%s: input %s has an empty plane", op,
                     bbb_shape_str(x, s, sizeof s));
  *oh = out_len(x->shape[2], kh, o->stride[0], o->pad[0], o->dil[0]);
  *ow = out_len(x->shape[3], kw, o->stride[1], o->pad[1], o->dil[1]);
  if (*oh == 0 || *ow == 0)
    return bbb_error(BBB_ESHAPE, "%s: kernel %lldx%lld (dilation %dx%d) is larger than the "
                     "padded input %lldx%lld (input %s, padding %dx%d): the output would be empty",
                     op, (long long)kh, (long long)kw, o->dil[0], o->dil[1],
                     (long long)(x->shape[2] + 2 * o->pad[0]),
                     (long long)(x->shape[3] + 2 * o->pad[1]), bbb_shape_str(x, s, sizeof s),
                     o->pad[0], o->pad[1]);
  return BBB_OK;
}

static int conv_shapes(geom *g, const bbb_tensor *x, const bbb_tensor *w, const bbb_tensor *b,
                       const bbb_conv_opts *o) {
  char s1[96], s2[96];
  int st = check_opts(o, "conv2d");
  if (st) return st;
  if (x->ndim != 4)
    return bbb_error(BBB_ESHAPE, "conv2d: input must be 4-d (batch, channels, height, width), "
                     "got %s", bbb_shape_str(x, s1, sizeof s1));
  if (w->ndim != 4)
    return bbb_error(BBB_ESHAPE, "conv2d: weight must be 4-d (out, in / groups, kH, kW), got %s",
                     bbb_shape_str(w, s1, sizeof s1));
  if (o->groups < 1) return bbb_error(BBB_EARG, "conv2d: groups must be >= 1, got %d", o->groups);
  int64_t G = o->groups;
  if (w->shape[0] == 0 || w->shape[0] % G || x->shape[1] % G)
    return bbb_error(BBB_ESHAPE, "conv2d: %lld input and %lld output channels must be positive "
                     "multiples of groups = %lld", (long long)x->shape[1], (long long)w->shape[0],
                     (long long)G);
  if (w->shape[1] * G != x->shape[1])
    return bbb_error(BBB_ESHAPE, "conv2d: input %s has %lld channels, weight %s expects %lld "
                     "(%lld per group x %lld groups)", bbb_shape_str(x, s1, sizeof s1),
                     (long long)x->shape[1], bbb_shape_str(w, s2, sizeof s2),
                     (long long)(w->shape[1] * G), (long long)w->shape[1], (long long)G);
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return bbb_error(BBB_ESHAPE, "conv2d: bias %s does not match weight %s (one per output channel)",
                     bbb_shape_str(b, s1, sizeof s1), bbb_shape_str(w, s2, sizeof s2));
  *g = (geom){ .B = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
               .O = w->shape[0], .kh = w->shape[2], .kw = w->shape[3], .G = G, .o = *o };
  st = plane_of(x, g->kh, g->kw, o, "conv2d", &g->oh, &g->ow);
  if (st) return st;
  g->Cg = g->C / G; g->Og = g->O / G;
  g->K = g->Cg * g->kh * g->kw; g->P = g->oh * g->ow;
  /* a tile holds the columns, their gradient and one group's output (the
  ** backward pass's need; the forward one takes less) */
  int64_t per_image = g->P * (2 * g->K + g->Og) * (int64_t)sizeof(bbb_float);
  g->T = per_image > 0 ? workspace_cap / per_image : g->B;
  if (g->T < 1) g->T = 1;
  if (g->T > g->B) g->T = g->B;
  if (g->K * g->T * g->P > INT32_MAX || g->Og * g->T * g->P > INT32_MAX)
    return bbb_error(BBB_ESHAPE, "conv2d: one image's column buffer (%lld x %lld) exceeds the "
                     "GEMM's 2^31 elements", (long long)g->K, (long long)g->P);
  return BBB_OK;
}

/* The tile being worked on: images n0 .. n0 + T - 1, group grp. */
typedef struct {
  const geom *g;
  int64_t n0, T, grp;
  const bbb_float *x;        /* im2col reads it */
  bbb_float *gx;             /* col2im adds into it */
  bbb_float *col;            /* (K, T P) */
} tile;

/* The outputs ox in [*lo, *hi) whose input column iw0 + ox s lies in [0, W). */
static void valid_range(int64_t iw0, int s, int64_t W, int64_t ow, int64_t *lo, int64_t *hi) {
  *lo = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
  *hi = iw0 > W - 1 ? 0 : (W - 1 - iw0) / s + 1;
  if (*hi > ow) *hi = ow;
  if (*lo > *hi) *lo = *hi;
}

/* Column rows [lo, hi): row (c, i, j) holds x[n, c, oy s - p + i d, ox s - p + j d]
** at column t P + oy ow + ox, zero outside the input. */
static void im2col_rows(void *p, int64_t lo, int64_t hi) {
  const tile *u = p;
  const geom *g = u->g;
  int sh = g->o.stride[0], sw = g->o.stride[1];
  for (int64_t k = lo; k < hi; k++) {
    int64_t c = u->grp * g->Cg + k / (g->kh * g->kw), i = k / g->kw % g->kh, j = k % g->kw;
    int64_t ih0 = i * g->o.dil[0] - g->o.pad[0], iw0 = j * g->o.dil[1] - g->o.pad[1], a, b;
    valid_range(iw0, sw, g->W, g->ow, &a, &b);
    for (int64_t t = 0; t < u->T; t++) {
      const bbb_float *plane = u->x + ((u->n0 + t) * g->C + c) * g->H * g->W;
      bbb_float *r = u->col + k * u->T * g->P + t * g->P;
      for (int64_t oy = 0; oy < g->oh; oy++, r += g->ow) {
        int64_t ih = ih0 + oy * sh;
        if (ih < 0 || ih >= g->H) { memset(r, 0, (size_t)g->ow * sizeof *r); continue; }
        const bbb_float *src = plane + ih * g->W + iw0;
        for (int64_t ox = 0; ox < a; ox++) r[ox] = 0;
        if (sw == 1) memcpy(r + a, src + a, (size_t)(b - a) * sizeof *r);
        else for (int64_t ox = a; ox < b; ox++) r[ox] = src[ox * sw];
        for (int64_t ox = b; ox < g->ow; ox++) r[ox] = 0;
      }
    }
  }
}

/* The transpose of im2col for channels [lo, hi) of the group: each column
** entry is added back to the input pixel it was read from. A channel's
** plane is written by one thread, in a fixed order. */
static void col2im_channels(void *p, int64_t lo, int64_t hi) {
  const tile *u = p;
  const geom *g = u->g;
  int sh = g->o.stride[0], sw = g->o.stride[1];
  for (int64_t cl = lo; cl < hi; cl++) {
    int64_t c = u->grp * g->Cg + cl;
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        int64_t k = (cl * g->kh + i) * g->kw + j;
        int64_t ih0 = i * g->o.dil[0] - g->o.pad[0], iw0 = j * g->o.dil[1] - g->o.pad[1], a, b;
        valid_range(iw0, sw, g->W, g->ow, &a, &b);
        for (int64_t t = 0; t < u->T; t++) {
          bbb_float *plane = u->gx + ((u->n0 + t) * g->C + c) * g->H * g->W;
          const bbb_float *r = u->col + k * u->T * g->P + t * g->P;
          for (int64_t oy = 0; oy < g->oh; oy++, r += g->ow) {
            int64_t ih = ih0 + oy * sh;
            if (ih < 0 || ih >= g->H) continue;
            bbb_float *dst = plane + ih * g->W + iw0;
            for (int64_t ox = a; ox < b; ox++) dst[ox * sw] += r[ox];
          }
        }
      }
  }
}

/* ybuf (Og, T P) of a tile, plus the bias, into y (B, O, P). */
static void scatter_out(const geom *g, const tile *u, const bbb_float *ybuf,
                        const bbb_float *bias, bbb_float *y) {
  for (int64_t t = 0; t < u->T; t++)
    for (int64_t co = 0; co < g->Og; co++) {
      int64_t oc = u->grp * g->Og + co;
      const bbb_float *src = ybuf + co * u->T * g->P + t * g->P;
      bbb_float *dst = y + ((u->n0 + t) * g->O + oc) * g->P, bv = bias ? bias[oc] : 0;
      for (int64_t q = 0; q < g->P; q++) dst[q] = src[q] + bv;
    }
}

/* The gradient of a tile's outputs, from gy (B, O, P), as gbuf (Og, T P). */
static void gather_grad(const geom *g, const tile *u, const bbb_float *gy, bbb_float *gbuf) {
  for (int64_t t = 0; t < u->T; t++)
    for (int64_t co = 0; co < g->Og; co++) {
      const bbb_float *src = gy + ((u->n0 + t) * g->O + u->grp * g->Og + co) * g->P;
      memcpy(gbuf + co * u->T * g->P + t * g->P, src, (size_t)g->P * sizeof *gbuf);
    }
}

/* What conv2d's forward or backward pass shares with its tile workers. A
** round runs one tile per thread, each in its own slot of scratch memory. */
typedef struct {
  const geom *g;
  const bbb_float *x, *w, *bias, *gy;
  bbb_float *y, *gx;
  int want_gw;               /* backward: fill each slot's grad w part */
  bbb_float **slot;          /* per thread: col, gcol, buf, gw part */
  int64_t first;             /* the round's first tile */
} conv_run;

static int64_t slot_floats(const geom *g, int backward) {
  int64_t tp = g->T * g->P;
  return backward ? (2 * g->K + g->Og) * tp + g->O * g->K : (g->K + g->Og) * tp;
}

/* The tile of round slot i, one group at a time. */
static void tile_at(const conv_run *r, int64_t i, tile *u) {
  const geom *g = r->g;
  int64_t n0 = (r->first + i) * g->T;
  *u = (tile){ g, n0, g->B - n0 < g->T ? g->B - n0 : g->T, 0, r->x, r->gx, r->slot[i] };
}

/* Forward of a tile: per group, its columns, one GEMM, the output planes. */
static void forward_tile(void *p, int64_t i, int64_t end) {
  const conv_run *r = p;
  const geom *g = r->g;
  tile u;
  tile_at(r, i, &u);
  bbb_float *ybuf = u.col + g->K * g->T * g->P;
  for (u.grp = 0; u.grp < g->G; u.grp++) {
    im2col_rows(&u, 0, g->K);
    gemm(0, 0, g->Og, u.T * g->P, g->K, r->w + u.grp * g->Og * g->K, u.col, 0, ybuf);
    scatter_out(g, &u, ybuf, r->bias, r->y);
  }
}

/* Backward of a tile: its part of grad w into the slot (summed in tile
** order afterwards) and grad x of its own images. */
static void backward_tile(void *p, int64_t i, int64_t end) {
  const conv_run *r = p;
  const geom *g = r->g;
  tile u;
  tile_at(r, i, &u);
  int64_t TP = u.T * g->P;
  bbb_float *col = u.col, *gcol = col + g->K * g->T * g->P, *gbuf = gcol + g->K * g->T * g->P;
  bbb_float *gw = gbuf + g->Og * g->T * g->P;
  for (u.grp = 0; u.grp < g->G; u.grp++) {
    gather_grad(g, &u, r->gy, gbuf);
    if (r->want_gw) {
      u.col = col;
      im2col_rows(&u, 0, g->K);
      gemm(0, 1, g->Og, g->K, TP, gbuf, col, 0, gw + u.grp * g->Og * g->K);
    }
    if (r->gx) {
      gemm(1, 0, g->K, TP, g->Og, r->w + u.grp * g->Og * g->K, gbuf, 0, gcol);
      u.col = gcol;
      col2im_channels(&u, 0, g->Cg);
    }
  }
}

/* Runs every tile, a round of one per thread at a time; after each round
** adds the slots' grad w parts into gw in tile order, so the sum is the
** same for any thread count. */
static int conv_rounds(conv_run *r, bbb_range_fn fn, bbb_float *gw, int backward) {
  const geom *g = r->g;
  if (g->B == 0) return BBB_OK;   /* an empty batch: nothing to tile */
  int64_t ntiles = (g->B + g->T - 1) / g->T, nt = bbb_get_num_threads();
  if (nt > ntiles) nt = ntiles;
  int64_t per = slot_floats(g, backward), OK = g->O * g->K;
  bbb_float *slots[64], *mem = NULL;
  if (nt > 64) nt = 64;
  if (nt > 0) mem = malloc((size_t)(nt * per) * sizeof *mem);
  if (nt > 0 && !mem)
    return bbb_error(BBB_EMEM, "conv2d: out of memory for the workspace (%lld threads x %lld "
                     "images per tile)", (long long)nt, (long long)g->T);
  for (int64_t k = 0; k < nt; k++) slots[k] = mem + k * per;
  r->slot = slots;
  int st = BBB_OK;
  for (r->first = 0; r->first < ntiles && !st; r->first += nt) {
    int64_t m = ntiles - r->first < nt ? ntiles - r->first : nt;
    bbb_parallel_each(m, fn, r);
    for (int64_t k = 0; gw && k < m; k++) {
      const bbb_float *part = slots[k] + per - OK;
      for (int64_t j = 0; j < OK; j++) gw[j] += part[j];
    }
    if (bbb_interrupted()) st = bbb_error(BBB_EINTR, "conv2d: interrupted");
  }
  free(mem);
  return st;
}

/* What a conv2d node saves: its options (the sizes come from the inputs). */
typedef struct { bbb_conv_opts o; } conv_saved;

static void bias_backward(const geom *g, const bbb_float *gy, bbb_float *gb) {
  for (int64_t oc = 0; oc < g->O; oc++) {
    double s = 0;
    for (int64_t n = 0; n < g->B; n++) {
      const bbb_float *r = gy + (n * g->O + oc) * g->P;
      for (int64_t q = 0; q < g->P; q++) s += r[q];
    }
    gb[oc] += (bbb_float)s;
  }
}

static int conv_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *gy) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t, *w = nd->in[1].t, *b = nd->in[2].t;
  const conv_saved *sv = bbb_node_ctx(nd);
  geom g;
  if ((st = conv_shapes(&g, x, w, b, &sv->o))) return st;
  bbb_float *gx = bbb_grad_of(x, &st), *gw = bbb_grad_of(w, &st), *gb = bbb_grad_of(b, &st);
  if (st) return st;
  if (gb) bias_backward(&g, gy, gb);
  if ((!gx && !gw) || g.B == 0) return BBB_OK;
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w), .gy = gy, .gx = gx,
                 .want_gw = gw != NULL };
  return conv_rounds(&r, backward_tile, gw, 1);
}

int bbb_conv2d(bbb_tensor **out, bbb_tensor *x, bbb_tensor *w, bbb_tensor *b,
               const bbb_conv_opts *o) {
  geom g;
  *out = NULL;
  int st = conv_shapes(&g, x, w, b, o);
  if (st) return st;
  int64_t shape[4] = { g.B, g.O, g.oh, g.ow };
  bbb_tensor *y = bbb_tensor_new(4, shape);
  if (!y) return bbb_errstatus();
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w), .bias = b ? bbb_data(b) : NULL,
                 .y = bbb_data(y) };
  st = conv_rounds(&r, forward_tile, NULL, 0);
  bbb_tensor *in[3] = { x, w, b };
  conv_saved sv = { *o };
  if (!st) st = bbb_record(y, BBB_OP_CONV2D, 0, conv_backward, 3, in, 3u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* ---- pooling ---- */

/* What a pooling node saves: its window. */
typedef struct { int k[2]; bbb_conv_opts o; int oh, ow; } pool_saved;

typedef struct {
  const pool_saved *s;
  int64_t H, W;
  const bbb_float *x, *g;
  bbb_float *y, *gx;
} pool_ctx;

/* The input window of output (oy, ox), clipped to the plane. */
static void window(const pool_ctx *u, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                   int64_t *x0, int64_t *x1) {
  *y0 = oy * u->s->o.stride[0] - u->s->o.pad[0];
  *x0 = ox * u->s->o.stride[1] - u->s->o.pad[1];
  *y1 = *y0 + u->s->k[0]; *x1 = *x0 + u->s->k[1];
  if (*y0 < 0) *y0 = 0;
  if (*x0 < 0) *x0 = 0;
  if (*y1 > u->H) *y1 = u->H;
  if (*x1 > u->W) *x1 = u->W;
}

/* The position of the window's maximum: the first in row order, or the
** first NaN (which then propagates, as in PyTorch). Selects, not branches:
** on real data which element wins is unpredictable. */
static int64_t argmax_in(const pool_ctx *u, const bbb_float *plane, int64_t oy, int64_t ox) {
  int64_t y0, y1, x0, x1;
  window(u, oy, ox, &y0, &y1, &x0, &x1);
  int64_t best = y0 * u->W + x0;
  bbb_float m = plane[best];
  int nan = m != m;
  for (int64_t iy = y0; iy < y1; iy++)
    for (int64_t ix = x0; ix < x1; ix++) {
      int64_t at = iy * u->W + ix;
      bbb_float v = plane[at];
      int take = (nan == 0) & ((v > m) | (v != v));
      best = take ? at : best;
      m = take ? v : m;
      nan |= v != v;
    }
  return best;
}

/* Sum of the window: padding counts as zeros. */
static bbb_float window_sum(const pool_ctx *u, const bbb_float *plane, int64_t oy, int64_t ox) {
  int64_t y0, y1, x0, x1;
  window(u, oy, ox, &y0, &y1, &x0, &x1);
  float s = 0;
  for (int64_t iy = y0; iy < y1; iy++)
    for (int64_t ix = x0; ix < x1; ix++) s += plane[iy * u->W + ix];
  return s;
}

/* Planes [lo, hi): forward (u->y) or backward (u->gx), max or average. */
static void pool_planes(pool_ctx *u, int64_t lo, int64_t hi, int max) {
  int64_t HW = u->H * u->W, OP = u->s->oh * u->s->ow;
  bbb_float area = (bbb_float)u->s->k[0] * (bbb_float)u->s->k[1];
  for (int64_t pl = lo; pl < hi; pl++) {
    const bbb_float *plane = u->x + pl * HW;
    for (int64_t oy = 0; oy < u->s->oh; oy++)
      for (int64_t ox = 0; ox < u->s->ow; ox++) {
        int64_t q = pl * OP + oy * u->s->ow + ox;
        if (u->y) {
          u->y[q] = max ? plane[argmax_in(u, plane, oy, ox)] : window_sum(u, plane, oy, ox) / area;
        } else if (max) {
          u->gx[pl * HW + argmax_in(u, plane, oy, ox)] += u->g[q];
        } else {
          int64_t y0, y1, x0, x1;
          window(u, oy, ox, &y0, &y1, &x0, &x1);
          for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) u->gx[pl * HW + iy * u->W + ix] += u->g[q] / area;
        }
      }
  }
}

static void max_planes(void *p, int64_t lo, int64_t hi) { pool_planes(p, lo, hi, 1); }
static void avg_planes(void *p, int64_t lo, int64_t hi) { pool_planes(p, lo, hi, 0); }

static int pool_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t;
  bbb_float *gx = bbb_grad_of(x, &st);
  if (!gx) return st;
  pool_ctx u = { bbb_node_ctx(nd), x->shape[2], x->shape[3], bbb_data(x), g, NULL, gx };
  int64_t planes = x->shape[0] * x->shape[1];
  bbb_parallel_for(planes, 1 + BBB_GRAIN_ELEM / (x->shape[2] * x->shape[3]),
                   nd->op == BBB_OP_MAX_POOL2D ? max_planes : avg_planes, &u);
  return bbb_interrupted() ? bbb_error(BBB_EINTR, "pool2d: interrupted") : BBB_OK;
}

static int pool_common(bbb_tensor **out, bbb_tensor *x, const int k[2], const bbb_conv_opts *o,
                       int max) {
  const char *op = max ? "max_pool2d" : "avg_pool2d";
  char s[96];
  *out = NULL;
  int st = check_opts(o, op);
  if (st) return st;
  if (x->ndim != 4)
    return bbb_error(BBB_ESHAPE, "%s: input must be 4-d (batch, channels, height, width), got %s",
                     op, bbb_shape_str(x, s, sizeof s));
  for (int i = 0; i < 2; i++) {
    if (k[i] < 1) return bbb_error(BBB_EARG, "%s: kernel size must be >= 1, got %d", op, k[i]);
    if (2 * o->pad[i] > k[i])
      return bbb_error(BBB_EARG, "%s: padding %d must be at most half the kernel size %d", op,
                       o->pad[i], k[i]);
  }
  pool_saved sv = { { k[0], k[1] }, *o, 0, 0 };
  sv.o.dil[0] = sv.o.dil[1] = 1;
  int64_t oh, ow;
  if ((st = plane_of(x, k[0], k[1], &sv.o, op, &oh, &ow))) return st;
  sv.oh = (int)oh; sv.ow = (int)ow;
  int64_t shape[4] = { x->shape[0], x->shape[1], sv.oh, sv.ow };
  bbb_tensor *y = bbb_tensor_new(4, shape);
  if (!y) return bbb_errstatus();
  pool_ctx u = { &sv, x->shape[2], x->shape[3], bbb_data(x), NULL, bbb_data(y), NULL };
  bbb_parallel_for(shape[0] * shape[1], 1 + BBB_GRAIN_ELEM / (x->shape[2] * x->shape[3]),
                   max ? max_planes : avg_planes, &u);
  st = bbb_interrupted() ? bbb_error(BBB_EINTR, "%s: interrupted", op) : BBB_OK;
  if (!st) st = bbb_record(y, max ? BBB_OP_MAX_POOL2D : BBB_OP_AVG_POOL2D, 0, pool_backward, 1, &x,
                           1u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

int bbb_max_pool2d(bbb_tensor **out, bbb_tensor *x, const int k[2], const bbb_conv_opts *o) {
  return pool_common(out, x, k, o, 1);
}

int bbb_avg_pool2d(bbb_tensor **out, bbb_tensor *x, const int k[2], const bbb_conv_opts *o) {
  return pool_common(out, x, k, o, 0);
}
