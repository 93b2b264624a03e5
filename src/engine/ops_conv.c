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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

/* 4 MiB per thread: tiles of about 20 images for LeNet's first layer, where
** a batch of 128 would take 10 MB of columns untiled. */
static int64_t workspace_cap = (int64_t)4 << 20;

int64_t bbb_conv_workspace(int64_t bytes) {
  int64_t old = workspace_cap;
  if (bytes > 0) workspace_cap = bytes;
  return old;
}

/* c (m, n) = op(a) op(b) + beta c, row-major contiguous: one call (gemm.c). */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const bbb_float *a,
                 const bbb_float *b, float beta, bbb_float *c) {
  bbb_sgemm(ta, tb, m, n, k, a, b, beta, c);
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
                       const bbb_conv_opts *o, const char *op) {
  char s1[96], s2[96];
  int st = check_opts(o, op);
  if (st) return st;
  if (x->ndim != 4)
    return bbb_error(BBB_ESHAPE, "%s: input must be 4-d (batch, channels, height, width), "
                     "got %s", op, bbb_shape_str(x, s1, sizeof s1));
  if (w->ndim != 4)
    return bbb_error(BBB_ESHAPE, "%s: weight must be 4-d (out, in / groups, kH, kW), got %s", op,
                     bbb_shape_str(w, s1, sizeof s1));
  if (o->groups < 1) return bbb_error(BBB_EARG, "%s: groups must be >= 1, got %d", op, o->groups);
  int64_t G = o->groups;
  if (w->shape[0] == 0 || w->shape[0] % G || x->shape[1] % G)
    return bbb_error(BBB_ESHAPE, "%s: %lld input and %lld output channels must be positive "
                     "multiples of groups = %lld", op, (long long)x->shape[1], (long long)w->shape[0],
                     (long long)G);
  if (w->shape[1] * G != x->shape[1])
    return bbb_error(BBB_ESHAPE, "%s: input %s has %lld channels, weight %s expects %lld "
                     "(%lld per group x %lld groups)", op, bbb_shape_str(x, s1, sizeof s1),
                     (long long)x->shape[1], bbb_shape_str(w, s2, sizeof s2),
                     (long long)(w->shape[1] * G), (long long)w->shape[1], (long long)G);
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return bbb_error(BBB_ESHAPE, "%s: bias %s does not match weight %s (one per output channel)", op,
                     bbb_shape_str(b, s1, sizeof s1), bbb_shape_str(w, s2, sizeof s2));
  *g = (geom){ .B = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
               .O = w->shape[0], .kh = w->shape[2], .kw = w->shape[3], .G = G, .o = *o };
  st = plane_of(x, g->kh, g->kw, o, op, &g->oh, &g->ow);
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
    return bbb_error(BBB_ESHAPE, "%s: one image's column buffer (%lld x %lld) exceeds the "
                     "GEMM's 2^31 elements", op, (long long)g->K, (long long)g->P);
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

/* d[0 .. n) = s[0 .. n) for the short rows of a column buffer (10 or 28
** floats in LeNet): up to 32 floats in eight- or four-float moves, the last
** one ending at n (it may rewrite a few floats with the same values); a
** memcpy call, or the scalar loop the vectorizer leaves at these lengths,
** costs more than the copy. Longer rows go to memcpy. */
typedef float f8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float f4u __attribute__((vector_size(16), aligned(4), may_alias));
static inline void copy_short(bbb_float *restrict d, const bbb_float *restrict s, int64_t n) {
  if (n > 32) {
    memcpy(d, s, (size_t)n * sizeof *d);
  } else if (n >= 8) {
    f8u first = *(const f8u *)s, last = *(const f8u *)(s + n - 8);
    if (n > 16) *(f8u *)(d + 8) = *(const f8u *)(s + 8);
    if (n > 24) *(f8u *)(d + 16) = *(const f8u *)(s + 16);
    *(f8u *)d = first;
    *(f8u *)(d + n - 8) = last;
  } else if (n >= 4) {
    f4u first = *(const f4u *)s, last = *(const f4u *)(s + n - 4);
    *(f4u *)d = first;
    *(f4u *)(d + n - 4) = last;
  } else {
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
  }
}

/* d[0 .. n) += s[0 .. n), eight at a time. */
static inline void add_short(bbb_float *restrict d, const bbb_float *restrict s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) d[i + q] += s[i + q];
  for (; i < n; i++) d[i] += s[i];
}

/* Column rows [lo, hi): row (c, i, j) holds x[n, c, oy s - p + i d, ox s - p + j d]
** at column t P + oy ow + ox, zero outside the input. The rows and columns
** that read the input are found once per row (valid_range), so the copy
** loops do no bounds tests. */
static void im2col_rows(void *p, int64_t lo, int64_t hi) {
  const tile *u = p;
  const geom *g = u->g;
  int sh = g->o.stride[0], sw = g->o.stride[1];
  int64_t oh = g->oh, ow = g->ow, P = g->P, W = g->W, HW = g->H * W;
  for (int64_t k = lo; k < hi; k++) {
    int64_t c = u->grp * g->Cg + k / (g->kh * g->kw), i = k / g->kw % g->kh, j = k % g->kw;
    int64_t ih0 = i * g->o.dil[0] - g->o.pad[0], iw0 = j * g->o.dil[1] - g->o.pad[1], a, b, ya, yb;
    valid_range(iw0, sw, W, ow, &a, &b);
    valid_range(ih0, sh, g->H, oh, &ya, &yb);
    const bbb_float *plane = u->x + (u->n0 * g->C + c) * HW;
    bbb_float *r = u->col + k * u->T * P;
    for (int64_t t = 0; t < u->T; t++, plane += g->C * HW, r += P) {
      memset(r, 0, (size_t)(ya * ow) * sizeof *r);
      memset(r + yb * ow, 0, (size_t)((oh - yb) * ow) * sizeof *r);
      bbb_float *row = r + ya * ow;
      for (int64_t oy = ya; oy < yb; oy++, row += ow) {
        const bbb_float *src = plane + (ih0 + oy * sh) * W + iw0;
        for (int64_t ox = 0; ox < a; ox++) row[ox] = 0;
        if (sw == 1) copy_short(row + a, src + a, b - a);
        else for (int64_t ox = a; ox < b; ox++) row[ox] = src[ox * sw];
        for (int64_t ox = b; ox < ow; ox++) row[ox] = 0;
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
  int64_t oh = g->oh, ow = g->ow, P = g->P, W = g->W, HW = g->H * W;
  for (int64_t cl = lo; cl < hi; cl++) {
    int64_t c = u->grp * g->Cg + cl;
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        int64_t k = (cl * g->kh + i) * g->kw + j;
        int64_t ih0 = i * g->o.dil[0] - g->o.pad[0], iw0 = j * g->o.dil[1] - g->o.pad[1], a, b, ya, yb;
        valid_range(iw0, sw, W, ow, &a, &b);
        valid_range(ih0, sh, g->H, oh, &ya, &yb);
        bbb_float *plane = u->gx + (u->n0 * g->C + c) * HW;
        const bbb_float *r = u->col + k * u->T * P;
        for (int64_t t = 0; t < u->T; t++, plane += g->C * HW, r += P) {
          const bbb_float *row = r + ya * ow;
          for (int64_t oy = ya; oy < yb; oy++, row += ow) {
            bbb_float *dst = plane + (ih0 + oy * sh) * W + iw0;
            if (sw == 1) add_short(dst + a, row + a, b - a);
            else for (int64_t ox = a; ox < b; ox++) dst[ox * sw] += row[ox];
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
  int want_gw;               /* backward: fill each slot's grad w parts */
  bbb_float **slot;          /* per thread: col, gcol, buf, gw parts */
  int64_t first;             /* the round's first tile */
  int64_t per;               /* floats per slot; its last ngw O K are the grad w parts */
  bbb_float *gws[2];         /* where the parts are summed (NULL: not wanted) */
  int ngw;
  /* two convolutions of one input (conv2d_local, conv2d_flipout) */
  int mode;
  const bbb_float *w2, *b2;  /* the second weight (sigma^2 or dW) and bias (local) */
  const bbb_float *na, *nb;  /* local: eps (B, O, P); flipout: s_in (B, C), s_out (B, O) */
  bbb_float *sd;             /* local: sqrt(var + eps) (B, O, P), saved for backward */
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
static int conv_rounds(conv_run *r, bbb_range_fn fn) {
  const geom *g = r->g;
  if (g->B == 0) return BBB_OK;   /* an empty batch: nothing to tile */
  int64_t ntiles = (g->B + g->T - 1) / g->T, nt = bbb_get_num_threads();
  if (nt > ntiles) nt = ntiles;
  int64_t per = r->per, OK = g->O * g->K;
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
    for (int64_t k = 0; k < m; k++)
      for (int p = 0; p < r->ngw; p++) {
        const bbb_float *part = slots[k] + per - (r->ngw - p) * OK;
        bbb_float *gw = r->gws[p];
        if (gw) for (int64_t j = 0; j < OK; j++) gw[j] += part[j];
      }
    if (bbb_interrupted()) st = bbb_error(BBB_EINTR, "conv2d: interrupted");
  }
  free(mem);
  return st;
}

/* What a conv2d node saves: its options (the sizes come from the inputs). */
typedef struct { bbb_conv_opts o; } conv_saved;

/* d loss / d (the local estimator's variance) from the output's gradient g,
** its noise e and its standard deviation s: y = mean + s e, s = sqrt(var + c). */
static inline bbb_float local_gvar(bbb_float g, bbb_float e, bbb_float s) {
  return g * e / (2.0f * s);
}

/* Bias gradients: per output channel the sum over the batch and the plane
** of g (eps NULL) or of local_gvar(g, eps, sd), in double, in a fixed order:
** BIAS_LANES running sums (position q goes to lane q mod BIAS_LANES of each
** plane), added up in lane order at the end. One running sum would be a
** chain of dependent additions as long as the batch times the plane. */
#define BIAS_LANES 8
typedef struct { const geom *g; const bbb_float *gy, *eps, *sd; bbb_float *gb; } bias_ctx;

static void bias_channels(void *p, int64_t lo, int64_t hi) {
  const bias_ctx *u = p;
  const geom *g = u->g;
  int64_t P = g->P, full = P / BIAS_LANES * BIAS_LANES;
  for (int64_t oc = lo; oc < hi; oc++) {
    double acc[BIAS_LANES] = { 0 };
    for (int64_t n = 0; n < g->B; n++) {
      int64_t off = (n * g->O + oc) * P;
      const bbb_float *r = u->gy + off;
      if (u->eps) {
        const bbb_float *e = u->eps + off, *s = u->sd + off;
        for (int64_t q = 0; q < full; q += BIAS_LANES)
          for (int j = 0; j < BIAS_LANES; j++) acc[j] += (double)local_gvar(r[q + j], e[q + j], s[q + j]);
        for (int64_t q = full; q < P; q++) acc[q - full] += (double)local_gvar(r[q], e[q], s[q]);
      } else {
        for (int64_t q = 0; q < full; q += BIAS_LANES)
          for (int j = 0; j < BIAS_LANES; j++) acc[j] += (double)r[q + j];
        for (int64_t q = full; q < P; q++) acc[q - full] += (double)r[q];
      }
    }
    double sum = 0;
    for (int j = 0; j < BIAS_LANES; j++) sum += acc[j];
    u->gb[oc] += (bbb_float)sum;
  }
}

static void bias_backward(const geom *g, const bbb_float *gy, bbb_float *gb) {
  bias_ctx u = { g, gy, NULL, NULL, gb };
  bbb_parallel_for(g->O, 1, bias_channels, &u);
}

static int conv_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *gy) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t, *w = nd->in[1].t, *b = nd->in[2].t;
  const conv_saved *sv = bbb_node_ctx(nd);
  geom g;
  if ((st = conv_shapes(&g, x, w, b, &sv->o, "conv2d"))) return st;
  bbb_float *gx = bbb_grad_of(x, &st), *gw = bbb_grad_of(w, &st), *gb = bbb_grad_of(b, &st);
  if (st) return st;
  if (gb) bias_backward(&g, gy, gb);
  if ((!gx && !gw) || g.B == 0) return BBB_OK;
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w), .gy = gy, .gx = gx,
                 .want_gw = gw != NULL, .per = slot_floats(&g, 1), .gws = { gw }, .ngw = 1 };
  return conv_rounds(&r, backward_tile);
}

int bbb_conv2d(bbb_tensor **out, bbb_tensor *x, bbb_tensor *w, bbb_tensor *b,
               const bbb_conv_opts *o) {
  geom g;
  *out = NULL;
  int st = conv_shapes(&g, x, w, b, o, "conv2d");
  if (st) return st;
  int64_t shape[4] = { g.B, g.O, g.oh, g.ow };
  bbb_tensor *y = bbb_tensor_new(4, shape);
  if (!y) return bbb_errstatus();
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w), .bias = b ? bbb_data(b) : NULL,
                 .y = bbb_data(y), .per = slot_floats(&g, 0) };
  st = conv_rounds(&r, forward_tile);
  bbb_tensor *in[3] = { x, w, b };
  conv_saved sv = { *o };
  if (!st) st = bbb_record(y, BBB_OP_CONV2D, 0, conv_backward, 3, in, 3u, &sv, sizeof sv, NULL);
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

/* ---- two convolutions of one input: the local reparameterization and
** flipout estimators of a Bayesian convolution, fused ----
**
** local:   y = conv(x, mu) + b_mu + sqrt(conv(x^2, var) + b_var + 1e-16) eps
** flipout: y = conv(x, mu) + b + conv(x s_in, dW) s_out, signs per image and
**          channel
** Each tile makes its columns once and takes the second convolution's
** columns from them in place (squared, or each channel's rows times its
** sign), so neither x^2 nor x s_in is ever formed, and the output is put
** together as the tile is written out. The noise (eps, s_in, s_out) takes
** no gradient. */
enum { PAIR_LOCAL, PAIR_FLIPOUT };
#define LOCAL_VAR_FLOOR 1e-16f

static int64_t pair_slot_floats(const geom *g, int backward) {
  int64_t tp = g->T * g->P;
  return backward ? (3 * g->K + 2 * g->Og) * tp + 2 * g->O * g->K : (g->K + 2 * g->Og) * tp;
}

/* The second convolution's columns from a tile's columns, in place. */
static void pair_cols(const conv_run *r, const tile *u, bbb_float *col) {
  const geom *g = r->g;
  int64_t P = g->P, TP = u->T * P, khw = g->kh * g->kw;
  for (int64_t k = 0; k < g->K; k++) {
    bbb_float *row = col + k * TP;
    if (r->mode == PAIR_LOCAL) {
      for (int64_t i = 0; i < TP; i++) row[i] *= row[i];
      continue;
    }
    int64_t c = u->grp * g->Cg + k / khw;
    for (int64_t t = 0; t < u->T; t++) {
      bbb_float sgn = r->na[(u->n0 + t) * g->C + c], *v = row + t * P;
      for (int64_t q = 0; q < P; q++) v[q] *= sgn;
    }
  }
}

/* A tile's two GEMM outputs y1, y2 (Og, T P) put together into y (B, O, P). */
static void pair_out(const conv_run *r, const tile *u, const bbb_float *y1, const bbb_float *y2) {
  const geom *g = r->g;
  int64_t P = g->P, TP = u->T * P;
  for (int64_t t = 0; t < u->T; t++)
    for (int64_t co = 0; co < g->Og; co++) {
      int64_t oc = u->grp * g->Og + co, n = u->n0 + t, off = (n * g->O + oc) * P;
      const bbb_float *a = y1 + co * TP + t * P, *v = y2 + co * TP + t * P;
      bbb_float *y = r->y + off, b1 = r->bias ? r->bias[oc] : 0;
      if (r->mode == PAIR_LOCAL) {
        const bbb_float *eps = r->na + off;
        bbb_float *sd = r->sd + off, b2 = r->b2 ? r->b2[oc] : 0;
        for (int64_t q = 0; q < P; q++) {
          bbb_float s = sqrtf(v[q] + b2 + LOCAL_VAR_FLOOR);
          sd[q] = s;
          y[q] = (a[q] + b1) + s * eps[q];
        }
      } else {
        bbb_float so = r->nb[n * g->O + oc];
        for (int64_t q = 0; q < P; q++) y[q] = (a[q] + b1) + v[q] * so;
      }
    }
}

static void pair_forward_tile(void *p, int64_t i, int64_t end) {
  const conv_run *r = p;
  const geom *g = r->g;
  tile u;
  tile_at(r, i, &u);
  int64_t TP = u.T * g->P, OK = g->Og * g->K;
  bbb_float *col = u.col, *y1 = col + g->K * g->T * g->P, *y2 = y1 + g->Og * g->T * g->P;
  for (u.grp = 0; u.grp < g->G; u.grp++) {
    im2col_rows(&u, 0, g->K);
    gemm(0, 0, g->Og, TP, g->K, r->w + u.grp * OK, col, 0, y1);
    pair_cols(r, &u, col);
    gemm(0, 0, g->Og, TP, g->K, r->w2 + u.grp * OK, col, 0, y2);
    pair_out(r, &u, y1, y2);
  }
}

/* A tile's output gradients: g1 of the first convolution, g2 of the second
** (Og, T P) each. */
static void pair_grads(const conv_run *r, const tile *u, bbb_float *g1, bbb_float *g2) {
  const geom *g = r->g;
  int64_t P = g->P, TP = u->T * P;
  for (int64_t t = 0; t < u->T; t++)
    for (int64_t co = 0; co < g->Og; co++) {
      int64_t oc = u->grp * g->Og + co, n = u->n0 + t, off = (n * g->O + oc) * P;
      const bbb_float *gy = r->gy + off;
      bbb_float *a = g1 + co * TP + t * P, *v = g2 + co * TP + t * P;
      memcpy(a, gy, (size_t)P * sizeof *a);
      if (r->mode == PAIR_LOCAL) {
        const bbb_float *eps = r->na + off, *sd = r->sd + off;
        for (int64_t q = 0; q < P; q++) v[q] = local_gvar(gy[q], eps[q], sd[q]);
      } else {
        bbb_float so = r->nb[n * g->O + oc];
        for (int64_t q = 0; q < P; q++) v[q] = gy[q] * so;
      }
    }
}

/* gc1 += the second convolution's column gradient gc2 taken back through
** pair_cols (2 x for the square, the sign for flipout); col holds x's columns. */
static void pair_col_grads(const conv_run *r, const tile *u, const bbb_float *col,
                           bbb_float *gc1, const bbb_float *gc2) {
  const geom *g = r->g;
  int64_t P = g->P, TP = u->T * P, khw = g->kh * g->kw;
  for (int64_t k = 0; k < g->K; k++) {
    bbb_float *a = gc1 + k * TP;
    const bbb_float *b = gc2 + k * TP, *c = col + k * TP;
    if (r->mode == PAIR_LOCAL) {
      for (int64_t i = 0; i < TP; i++) a[i] += 2.0f * c[i] * b[i];
      continue;
    }
    int64_t ch = u->grp * g->Cg + k / khw;
    for (int64_t t = 0; t < u->T; t++) {
      bbb_float sgn = r->na[(u->n0 + t) * g->C + ch];
      for (int64_t q = t * P; q < (t + 1) * P; q++) a[q] += b[q] * sgn;
    }
  }
}

static void pair_backward_tile(void *p, int64_t i, int64_t end) {
  const conv_run *r = p;
  const geom *g = r->g;
  tile u;
  tile_at(r, i, &u);
  int64_t TP = u.T * g->P, KTP = g->K * g->T * g->P, OTP = g->Og * g->T * g->P, OK = g->Og * g->K;
  bbb_float *col = u.col, *gc1 = col + KTP, *gc2 = gc1 + KTP, *g1 = gc2 + KTP, *g2 = g1 + OTP;
  bbb_float *gw1 = g2 + OTP, *gw2 = gw1 + g->O * g->K;
  for (u.grp = 0; u.grp < g->G; u.grp++) {
    pair_grads(r, &u, g1, g2);
    u.col = col;
    im2col_rows(&u, 0, g->K);
    if (r->gx) {
      gemm(1, 0, g->K, TP, g->Og, r->w + u.grp * OK, g1, 0, gc1);
      gemm(1, 0, g->K, TP, g->Og, r->w2 + u.grp * OK, g2, 0, gc2);
      pair_col_grads(r, &u, col, gc1, gc2);
      u.col = gc1;
      col2im_channels(&u, 0, g->Cg);
    }
    if (r->want_gw) {
      gemm(0, 1, g->Og, g->K, TP, g1, col, 0, gw1 + u.grp * OK);
      pair_cols(r, &u, col);
      gemm(0, 1, g->Og, g->K, TP, g2, col, 0, gw2 + u.grp * OK);
    }
  }
}

/* What a conv2d_local or conv2d_flipout node saves: options and mode; its
** inputs are x, w1, w2, b1, b2, na, nb and (local) sd. */
typedef struct { bbb_conv_opts o; int mode; } pair_saved;

static int pair_geom(geom *g, int mode, bbb_tensor *x, bbb_tensor *w1, bbb_tensor *w2,
                     bbb_tensor *b1, bbb_tensor *b2, bbb_tensor *na, bbb_tensor *nb,
                     const bbb_conv_opts *o) {
  const char *op = mode == PAIR_LOCAL ? "conv2d_local" : "conv2d_flipout";
  const char *w2n = mode == PAIR_LOCAL ? "var" : "dw";
  char s1[96], s2[96];
  int st = conv_shapes(g, x, w1, b1, o, op);
  if (st) return st;
  if (!bbb_same_shape(w1, w2))
    return bbb_error(BBB_ESHAPE, "%s: %s %s does not match mu %s", op, w2n,
                     bbb_shape_str(w2, s1, sizeof s1), bbb_shape_str(w1, s2, sizeof s2));
  if (mode == PAIR_LOCAL && (b1 == NULL) != (b2 == NULL))
    return bbb_error(BBB_EARG, "%s: give both bias_mu and bias_var or neither", op);
  if (b2 && !bbb_same_shape(b1, b2))
    return bbb_error(BBB_ESHAPE, "%s: bias_var %s does not match bias_mu %s", op,
                     bbb_shape_str(b2, s1, sizeof s1), bbb_shape_str(b1, s2, sizeof s2));
  bbb_tensor *noise[2] = { na, nb };
  const char *nname[2] = { mode == PAIR_LOCAL ? "eps" : "s_in", "s_out" };
  for (int k = 0; k < (mode == PAIR_LOCAL ? 1 : 2); k++) {
    bbb_tensor *t = noise[k];
    int64_t want = mode == PAIR_LOCAL ? g->B * g->O * g->P : g->B * (k ? g->O : g->C);
    int ok = t && t->numel == want && t->ndim >= 1 && t->shape[0] == g->B;
    if (mode == PAIR_LOCAL) ok = ok && t->ndim == 4 && t->shape[1] == g->O && t->shape[2] == g->oh;
    if (!ok) {
      if (mode == PAIR_LOCAL)
        return bbb_error(BBB_ESHAPE, "%s: eps %s must have the output's shape (%lld, %lld, %lld, %lld)",
                         op, t ? bbb_shape_str(t, s1, sizeof s1) : "(none)", (long long)g->B,
                         (long long)g->O, (long long)g->oh, (long long)g->ow);
      return bbb_error(BBB_ESHAPE, "%s: %s %s must hold one sign per image and %s channel "
                       "(%lld x %lld, as (B, C) or (B, C, 1, 1))", op, nname[k],
                       t ? bbb_shape_str(t, s1, sizeof s1) : "(none)", k ? "output" : "input",
                       (long long)g->B, (long long)(k ? g->O : g->C));
    }
    if (bbb_tensor_requires_grad(t))
      return bbb_error(BBB_EARG, "%s: %s is noise and takes no gradient; pass it detached", op,
                       nname[k]);
  }
  /* the backward pass's slot: three column buffers, two output gradients */
  int64_t per_image = g->P * (3 * g->K + 2 * g->Og) * (int64_t)sizeof(bbb_float);
  g->T = per_image > 0 ? workspace_cap / per_image : g->B;
  if (g->T < 1) g->T = 1;
  if (g->T > g->B) g->T = g->B;
  return BBB_OK;
}

static int pair_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *gy) {
  int st = BBB_OK;
  bbb_tensor *x = nd->in[0].t, *w1 = nd->in[1].t, *w2 = nd->in[2].t, *b1 = nd->in[3].t;
  bbb_tensor *b2 = nd->in[4].t, *na = nd->in[5].t, *nb = nd->in[6].t, *sd = nd->in[7].t;
  const pair_saved *sv = bbb_node_ctx(nd);
  geom g;
  if ((st = pair_geom(&g, sv->mode, x, w1, w2, b1, b2, na, nb, &sv->o))) return st;
  bbb_float *gx = bbb_grad_of(x, &st), *gw1 = bbb_grad_of(w1, &st), *gw2 = bbb_grad_of(w2, &st);
  bbb_float *gb1 = bbb_grad_of(b1, &st), *gb2 = bbb_grad_of(b2, &st);
  if (st) return st;
  if (gb1) bias_backward(&g, gy, gb1);
  if (gb2) {
    bias_ctx u = { &g, gy, bbb_data(na), bbb_data(sd), gb2 };
    bbb_parallel_for(g.O, 1, bias_channels, &u);
  }
  if ((!gx && !gw1 && !gw2) || g.B == 0) return BBB_OK;
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w1), .gy = gy, .gx = gx,
                 .want_gw = gw1 || gw2, .per = pair_slot_floats(&g, 1), .gws = { gw1, gw2 },
                 .ngw = 2, .mode = sv->mode, .w2 = bbb_data(w2), .na = bbb_data(na),
                 .nb = nb ? bbb_data(nb) : NULL, .sd = sd ? bbb_data(sd) : NULL };
  return conv_rounds(&r, pair_backward_tile);
}

static int conv2d_pair(bbb_tensor **out, int mode, bbb_tensor *x, bbb_tensor *w1, bbb_tensor *w2,
                       bbb_tensor *b1, bbb_tensor *b2, bbb_tensor *na, bbb_tensor *nb,
                       const bbb_conv_opts *o) {
  geom g;
  *out = NULL;
  int st = pair_geom(&g, mode, x, w1, w2, b1, b2, na, nb, o);
  if (st) return st;
  int64_t shape[4] = { g.B, g.O, g.oh, g.ow };
  bbb_tensor *y = bbb_tensor_new(4, shape);
  bbb_tensor *sd = mode == PAIR_LOCAL ? bbb_tensor_new(4, shape) : NULL;
  if (!y || (mode == PAIR_LOCAL && !sd)) {
    bbb_tensor_release(y);
    bbb_tensor_release(sd);
    return bbb_error(BBB_EMEM, "%s: out of memory for the output",
                     mode == PAIR_LOCAL ? "conv2d_local" : "conv2d_flipout");
  }
  conv_run r = { .g = &g, .x = bbb_data(x), .w = bbb_data(w1), .bias = b1 ? bbb_data(b1) : NULL,
                 .y = bbb_data(y), .per = pair_slot_floats(&g, 0), .mode = mode,
                 .w2 = bbb_data(w2), .b2 = b2 ? bbb_data(b2) : NULL, .na = bbb_data(na),
                 .nb = nb ? bbb_data(nb) : NULL, .sd = sd ? bbb_data(sd) : NULL };
  st = conv_rounds(&r, pair_forward_tile);
  bbb_tensor *in[8] = { x, w1, w2, b1, b2, na, nb, sd };
  pair_saved sv = { *o, mode };
  unsigned saves = mode == PAIR_LOCAL ? 0xA7u : 0x67u;   /* x, w1, w2, na, and sd or nb */
  if (!st) st = bbb_record(y, mode == PAIR_LOCAL ? BBB_OP_CONV2D_LOCAL : BBB_OP_CONV2D_FLIPOUT, 0,
                           pair_backward, 8, in, saves, &sv, sizeof sv, NULL);
  bbb_tensor_release(sd);   /* the node holds it if it needs it */
  if (st) { bbb_tensor_release(y); return st; }
  *out = y;
  return BBB_OK;
}

int bbb_conv2d_local(bbb_tensor **out, bbb_tensor *x, bbb_tensor *mu, bbb_tensor *var,
                     bbb_tensor *b_mu, bbb_tensor *b_var, bbb_tensor *eps, const bbb_conv_opts *o) {
  return conv2d_pair(out, PAIR_LOCAL, x, mu, var, b_mu, b_var, eps, NULL, o);
}

int bbb_conv2d_flipout(bbb_tensor **out, bbb_tensor *x, bbb_tensor *mu, bbb_tensor *dw,
                       bbb_tensor *b, bbb_tensor *s_in, bbb_tensor *s_out, const bbb_conv_opts *o) {
  return conv2d_pair(out, PAIR_FLIPOUT, x, mu, dw, b, NULL, s_in, s_out, o);
}

/* ---- pooling ---- */

/* What a pooling node saves: its window, its output plane and, for max
** pooling, how in[1] holds the argmax of each output: fast (the 2x2,
** stride 2 path) one byte per output, the window position dy 2 + dx;
** else one int32 per output, the offset in its input plane. */
typedef struct { int k[2], s[2], p[2]; int64_t oh, ow; int fast; } pool_saved;

/* The 2x2 stride-2 kernels are used when set; tests turn them off to
** compare them with the general loops. */
static int pool_fast_on = 1;

int bbb_pool_fast_path(int on) {
  int old = pool_fast_on;
  if (on >= 0) pool_fast_on = on != 0;
  return old;
}

static int is_fast(const pool_saved *s) {
  return pool_fast_on && s->k[0] == 2 && s->k[1] == 2 && s->s[0] == 2 && s->s[1] == 2
         && s->p[0] == 0 && s->p[1] == 0;
}

typedef struct {
  const pool_saved *s;
  int64_t H, W;
  const bbb_float *x, *g;    /* x (planes, H, W); g (planes, oh, ow) */
  bbb_float *y, *gx;         /* y (planes, oh, ow); gx (planes, H, W) */
  void *idx;                 /* argmax per output (see pool_saved), NULL when not kept */
  int fresh;                 /* backward: gx is uninitialised, write every element */
} pool_ctx;

/* The input window of output (oy, ox), clipped to the plane. */
static void window(const pool_ctx *u, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                   int64_t *x0, int64_t *x1) {
  *y0 = oy * u->s->s[0] - u->s->p[0];
  *x0 = ox * u->s->s[1] - u->s->p[1];
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

/* Planes [lo, hi) by the general loops: forward (u->y) or backward (u->gx),
** max or average. The max forward keeps each argmax's offset when u->idx
** is set; the max backward adds each gradient at the kept offset. */
static void pool_planes(pool_ctx *u, int64_t lo, int64_t hi, int max) {
  int64_t HW = u->H * u->W, OP = u->s->oh * u->s->ow;
  bbb_float area = (bbb_float)u->s->k[0] * (bbb_float)u->s->k[1];
  int32_t *idx = u->idx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const bbb_float *plane = u->x + pl * HW;
    if (u->gx && u->fresh) memset(u->gx + pl * HW, 0, (size_t)HW * sizeof *u->gx);
    for (int64_t oy = 0; oy < u->s->oh; oy++)
      for (int64_t ox = 0; ox < u->s->ow; ox++) {
        int64_t q = pl * OP + oy * u->s->ow + ox;
        if (u->y && max) {
          int64_t at = argmax_in(u, plane, oy, ox);
          u->y[q] = plane[at];
          if (idx) idx[q] = (int32_t)at;
        } else if (u->y) {
          u->y[q] = window_sum(u, plane, oy, ox) / area;
        } else if (max) {
          u->gx[pl * HW + idx[q]] += u->g[q];
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

/* The 2x2 stride-2 max. Its output rows are short (14 and 5 in LeNet), so
** the loop vectorizer would leave them to scalar code that branches on
** every unpredictable comparison: eight outputs are taken at once in
** vectors instead, a row's last part through a padded copy. Each maximum
** is chosen as argmax_in does: the first in the order r0[2i], r0[2i+1],
** r1[2i], r1[2i+1], or the first NaN; its position (0..3) is kept.
** -DBBB_POOL_SCALAR builds the plain loops instead (compilers without
** __builtin_shufflevector get them anyway). */
#if defined(__has_builtin) && !defined(BBB_POOL_SCALAR)
#if __has_builtin(__builtin_shufflevector)
#define BBB_POOL_VEC 1
#endif
#endif

#ifdef BBB_POOL_VEC
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Outputs i .. i + 7 from r0[2i .. 2i + 16) and r1[2i .. 2i + 16). */
static inline void max2_vec(const bbb_float *r0, const bbb_float *r1, bbb_float *y, uint8_t *at) {
  v8f p, q, s, t;
  memcpy(&p, r0, sizeof p); memcpy(&q, r0 + 8, sizeof q);
  memcpy(&s, r1, sizeof s); memcpy(&t, r1 + 8, sizeof t);
  v8f a = __builtin_shufflevector(p, q, 0, 2, 4, 6, 8, 10, 12, 14);
  v8f b = __builtin_shufflevector(p, q, 1, 3, 5, 7, 9, 11, 13, 15);
  v8f c = __builtin_shufflevector(s, t, 0, 2, 4, 6, 8, 10, 12, 14);
  v8f d = __builtin_shufflevector(s, t, 1, 3, 5, 7, 9, 11, 13, 15);
  /* the masks are all ones where true; m holds the maximum's bits */
  v8i nan = a != a, m = (v8i)a, best = { 0 }, take;
  take = ~nan & ((b > (v8f)m) | (b != b));
  m = (m & ~take) | ((v8i)b & take); best = (best & ~take) | (1 & take); nan |= b != b;
  take = ~nan & ((c > (v8f)m) | (c != c));
  m = (m & ~take) | ((v8i)c & take); best = (best & ~take) | (2 & take); nan |= c != c;
  take = ~nan & ((d > (v8f)m) | (d != d));
  m = (m & ~take) | ((v8i)d & take); best = (best & ~take) | (3 & take);
  memcpy(y, &m, sizeof m);
  if (at)
    for (int k = 0; k < 8; k++) at[k] = (uint8_t)best[k];
}

static void max2_row(const bbb_float *r0, const bbb_float *r1, int64_t ow, bbb_float *y,
                     uint8_t *at) {
  int64_t i = 0;
  for (; i + 8 <= ow; i += 8) max2_vec(r0 + 2 * i, r1 + 2 * i, y + i, at ? at + i : NULL);
  if (i == ow) return;
  if (ow >= 8) {   /* the last eight again: the same values written twice */
    i = ow - 8;
    max2_vec(r0 + 2 * i, r1 + 2 * i, y + i, at ? at + i : NULL);
    return;
  }
  bbb_float a[16] = { 0 }, b[16] = { 0 }, yv[8];
  uint8_t av[8];
  memcpy(a, r0, (size_t)(2 * ow) * sizeof *a);
  memcpy(b, r1, (size_t)(2 * ow) * sizeof *b);
  max2_vec(a, b, yv, av);
  memcpy(y, yv, (size_t)ow * sizeof *y);
  if (at) memcpy(at, av, (size_t)ow);
}
#else
static void max2_row(const bbb_float *r0, const bbb_float *r1, int64_t ow, bbb_float *y,
                     uint8_t *at) {
  for (int64_t i = 0; i < ow; i++) {
    bbb_float v[4] = { r0[2 * i], r0[2 * i + 1], r1[2 * i], r1[2 * i + 1] }, m = v[0];
    int nan = m != m, best = 0;
    for (int k = 1; k < 4; k++) {
      int take = (nan == 0) & ((v[k] > m) | (v[k] != v[k]));
      best = take ? k : best; m = take ? v[k] : m; nan |= v[k] != v[k];
    }
    y[i] = m;
    if (at) at[i] = (uint8_t)best;
  }
}
#endif

static void max2_forward(void *p, int64_t lo, int64_t hi) {
  const pool_ctx *u = p;
  int64_t W = u->W, HW = u->H * W, oh = u->s->oh, ow = u->s->ow;
  uint8_t *idx = u->idx;
  for (int64_t pl = lo; pl < hi; pl++)
    for (int64_t oy = 0; oy < oh; oy++) {
      const bbb_float *r0 = u->x + pl * HW + 2 * oy * W;
      int64_t q = (pl * oh + oy) * ow;
      max2_row(r0, r0 + W, ow, u->y + q, idx ? idx + q : NULL);
    }
}

/* The 2x2 stride-2 max backward of one output row: the windows do not
** overlap, so each input gets its window's gradient where the maximum was
** and nothing elsewhere. Into a fresh buffer every element is written
** (0 + g, as the zero-filled general path gives); else -0.0 is added off
** the maximum, which leaves every value as it was. */
#ifdef BBB_POOL_VEC
/* Inputs 2i .. 2i + 16 of both rows from outputs i .. i + 7. */
static inline void max2_back_vec(bbb_float *r0, bbb_float *r1, const bbb_float *g,
                                 const uint8_t *at, int fresh) {
  v8f gv, off = { 0 }, z = { 0 };
  v8i a;
  memcpy(&gv, g, sizeof gv);
  for (int k = 0; k < 8; k++) a[k] = at[k];
  if (fresh) gv = gv + z;
  else off = -z;   /* -0.0 in every lane */
  v8i e0 = ((v8i)gv & (a == 0)) | ((v8i)off & ~(a == 0));
  v8i e1 = ((v8i)gv & (a == 1)) | ((v8i)off & ~(a == 1));
  v8i e2 = ((v8i)gv & (a == 2)) | ((v8i)off & ~(a == 2));
  v8i e3 = ((v8i)gv & (a == 3)) | ((v8i)off & ~(a == 3));
  v8f t0 = (v8f)__builtin_shufflevector(e0, e1, 0, 8, 1, 9, 2, 10, 3, 11);
  v8f t1 = (v8f)__builtin_shufflevector(e0, e1, 4, 12, 5, 13, 6, 14, 7, 15);
  v8f b0 = (v8f)__builtin_shufflevector(e2, e3, 0, 8, 1, 9, 2, 10, 3, 11);
  v8f b1 = (v8f)__builtin_shufflevector(e2, e3, 4, 12, 5, 13, 6, 14, 7, 15);
  if (!fresh) {
    v8f p, q, s, t;
    memcpy(&p, r0, sizeof p); memcpy(&q, r0 + 8, sizeof q);
    memcpy(&s, r1, sizeof s); memcpy(&t, r1 + 8, sizeof t);
    t0 = p + t0; t1 = q + t1; b0 = s + b0; b1 = t + b1;
  }
  memcpy(r0, &t0, sizeof t0); memcpy(r0 + 8, &t1, sizeof t1);
  memcpy(r1, &b0, sizeof b0); memcpy(r1 + 8, &b1, sizeof b1);
}

static void max2_back_row(bbb_float *r0, bbb_float *r1, int64_t ow, const bbb_float *g,
                          const uint8_t *at, int fresh) {
  int64_t i = 0;
  for (; i + 8 <= ow; i += 8) max2_back_vec(r0 + 2 * i, r1 + 2 * i, g + i, at + i, fresh);
  if (i == ow) return;
  int64_t n = ow - i;
  bbb_float a[16] = { 0 }, b[16] = { 0 }, gv[8] = { 0 };
  uint8_t av[8] = { 0 };
  if (!fresh) {
    memcpy(a, r0 + 2 * i, (size_t)(2 * n) * sizeof *a);
    memcpy(b, r1 + 2 * i, (size_t)(2 * n) * sizeof *b);
  }
  memcpy(gv, g + i, (size_t)n * sizeof *gv);
  memcpy(av, at + i, (size_t)n);
  max2_back_vec(a, b, gv, av, fresh);
  memcpy(r0 + 2 * i, a, (size_t)(2 * n) * sizeof *a);
  memcpy(r1 + 2 * i, b, (size_t)(2 * n) * sizeof *b);
}
#else
static void max2_back_row(bbb_float *r0, bbb_float *r1, int64_t ow, const bbb_float *g,
                          const uint8_t *at, int fresh) {
  bbb_float off = fresh ? 0.0f : -0.0f;
  for (int64_t i = 0; i < ow; i++) {
    bbb_float v = fresh ? g[i] + 0.0f : g[i];
    bbb_float e[4] = { at[i] == 0 ? v : off, at[i] == 1 ? v : off, at[i] == 2 ? v : off,
                       at[i] == 3 ? v : off };
    if (fresh) {
      r0[2 * i] = e[0]; r0[2 * i + 1] = e[1]; r1[2 * i] = e[2]; r1[2 * i + 1] = e[3];
    } else {
      r0[2 * i] += e[0]; r0[2 * i + 1] += e[1]; r1[2 * i] += e[2]; r1[2 * i + 1] += e[3];
    }
  }
}
#endif

static void max2_backward(void *p, int64_t lo, int64_t hi) {
  const pool_ctx *u = p;
  int64_t W = u->W, H = u->H, HW = H * W, oh = u->s->oh, ow = u->s->ow;
  const uint8_t *idx = u->idx;
  for (int64_t pl = lo; pl < hi; pl++) {
    bbb_float *plane = u->gx + pl * HW;
    for (int64_t oy = 0; oy < oh; oy++) {
      bbb_float *r0 = plane + 2 * oy * W;
      int64_t q = (pl * oh + oy) * ow;
      max2_back_row(r0, r0 + W, ow, u->g + q, idx + q, u->fresh);
      if ((W & 1) && u->fresh) r0[W - 1] = r0[2 * W - 1] = 0;
    }
    if ((H & 1) && u->fresh) memset(plane + (H - 1) * W, 0, (size_t)W * sizeof *plane);
  }
}

static int64_t pool_grain(const bbb_tensor *x) {
  return 1 + BBB_GRAIN_ELEM / (x->shape[2] * x->shape[3]);
}

static int pool_backward(bbb_node *nd, bbb_tensor *out, const bbb_float *g) {
  int st = BBB_OK, fresh;
  bbb_tensor *x = nd->in[0].t;
  const pool_saved *sv = bbb_node_ctx(nd);
  int max = nd->op == BBB_OP_MAX_POOL2D, fast = max && sv->fast;
  bbb_float *gx = bbb_grad_begin(x, &fresh, &st);
  if (!gx) return st;
  pool_ctx u = { sv, x->shape[2], x->shape[3], bbb_data(x), g, NULL, gx,
                 max ? (void *)bbb_data(nd->in[1].t) : NULL, fresh };
  bbb_parallel_for(x->shape[0] * x->shape[1], pool_grain(x),
                   fast ? max2_backward : max ? max_planes : avg_planes, &u);
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
  bbb_conv_opts po = *o;
  po.dil[0] = po.dil[1] = 1;
  pool_saved sv = { { k[0], k[1] }, { o->stride[0], o->stride[1] }, { o->pad[0], o->pad[1] },
                    0, 0, 0 };
  if ((st = plane_of(x, k[0], k[1], &po, op, &sv.oh, &sv.ow))) return st;
  sv.fast = max && is_fast(&sv);
  if (max && !sv.fast && x->shape[2] * x->shape[3] > INT32_MAX)
    return bbb_error(BBB_ESHAPE, "%s: input %s: a plane of more than 2^31 elements", op,
                     bbb_shape_str(x, s, sizeof s));
  int64_t shape[4] = { x->shape[0], x->shape[1], sv.oh, sv.ow }, n = shape[0] * shape[1] * sv.oh * sv.ow;
  /* the argmax of each output, kept when a backward pass may come */
  int keep = max && bbb_grad_enabled() && bbb_tensor_requires_grad(x);
  int64_t idx_len = (sv.fast ? (n + 3) / 4 : n);
  bbb_tensor *y = bbb_tensor_new(4, shape), *idx = keep ? bbb_tensor_new(1, &idx_len) : NULL;
  if (!y || (keep && !idx)) {
    bbb_tensor_release(y);
    bbb_tensor_release(idx);
    return bbb_error(BBB_EMEM, "%s: out of memory for an output %s", op,
                     bbb_shape_str(x, s, sizeof s));
  }
  pool_ctx u = { &sv, x->shape[2], x->shape[3], bbb_data(x), NULL, bbb_data(y), NULL,
                 idx ? (void *)bbb_data(idx) : NULL, 0 };
  bbb_parallel_for(shape[0] * shape[1], pool_grain(x),
                   sv.fast ? max2_forward : max ? max_planes : avg_planes, &u);
  st = bbb_interrupted() ? bbb_error(BBB_EINTR, "%s: interrupted", op) : BBB_OK;
  bbb_tensor *in[2] = { x, idx };
  if (!st) st = bbb_record(y, max ? BBB_OP_MAX_POOL2D : BBB_OP_AVG_POOL2D, 0, pool_backward,
                           max ? 2 : 1, in, max ? 2u : 1u, &sv, sizeof sv, NULL);
  bbb_tensor_release(idx);   /* the node holds it if it needs it */
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
