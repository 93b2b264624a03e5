/*
** ops.h: differentiable tensor ops. Each returns a status and a new tensor
** in *out (the caller owns it); when an input requires grad and grad mode is
** on, out carries the node for backward. Dimensions are 0-based here.
*/
#ifndef BBB_OPS_H
#define BBB_OPS_H

#include "engine/rng.h"
#include "engine/tensor.h"

typedef enum {
  BBB_NEG, BBB_EXP, BBB_LOG, BBB_LOG1P, BBB_SOFTPLUS, BBB_SIGMOID, BBB_TANH,
  BBB_RELU, BBB_SQRT, BBB_SQUARE, BBB_ABS,
  BBB_POWS,     /* x^p0 */
  BBB_CLAMP,    /* min(max(x, p0), p1) */
  BBB_ADDS,     /* x + p0 */
  BBB_MULS,     /* x * p0 */
  BBB_RSUBS,    /* p0 - x */
  BBB_RDIVS,    /* p0 / x */
  BBB_GTS,      /* 1 where x > p0, else 0 (zero gradient) */
  BBB_LTS,      /* 1 where x < p0, else 0 (zero gradient) */
  BBB_UNARY_COUNT
} bbb_unary_op;

typedef enum {
  BBB_ADD, BBB_SUB, BBB_MUL, BBB_DIV, BBB_MAXIMUM, BBB_MINIMUM, BBB_LOGADDEXP,
  BBB_BINARY_COUNT
} bbb_binary_op;

typedef enum { BBB_SUM, BBB_MEAN, BBB_MAX, BBB_LOGSUMEXP, BBB_REDUCE_COUNT } bbb_reduce_op;

extern const char *const bbb_unary_names[];   /* one per op, checked at compile time */
extern const char *const bbb_binary_names[];
extern const char *const bbb_reduce_names[];

int bbb_unary(bbb_tensor **out, int op, bbb_tensor *x, double p0, double p1);
/* NumPy broadcasting. */
int bbb_binary(bbb_tensor **out, int op, bbb_tensor *a, bbb_tensor *b);

/* dim < 0 reduces over all elements (a 0-d result unless keepdim). */
int bbb_reduce(bbb_tensor **out, int op, bbb_tensor *x, int dim, int keepdim);
/* Positions of the maxima as floats, counted from base (1 in Lua). */
int bbb_argmax(bbb_tensor **out, bbb_tensor *x, int dim, int keepdim, int base);

/* 2-d: op(a) op(b), op = transpose when the flag is set; bbb_gemm. */
int bbb_matmul(bbb_tensor **out, bbb_tensor *a, bbb_tensor *b, int ta, int tb);
/* x (B, in), w (out, in), b (out) or NULL: x w^T + b */
int bbb_linear(bbb_tensor **out, bbb_tensor *x, bbb_tensor *w, bbb_tensor *b);
/* The GEMM under matmul and linear, on caller's buffers (the fused step,
** mlp.c): c (m, n) = op(a) op(b) + beta c, row-major, cut into tiles by
** shape alone, each one single-thread product (gemm.c). */
void bbb_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const bbb_float *a,
              const bbb_float *b, float beta, bbb_float *c);

/* Over the last dimension. */
int bbb_log_softmax(bbb_tensor **out, bbb_tensor *x);
int bbb_softmax(bbb_tensor **out, bbb_tensor *x);
/* logp (B, C), labels (B) holding class numbers base..base+C-1 as floats.
** Mean (or sum) of -logp[b, label_b]. */
int bbb_nll(bbb_tensor **out, bbb_tensor *logp, bbb_tensor *labels, int base, int mean);

/* Shapes. reshape shares storage; narrow on dim 0 too. */
int bbb_reshape(bbb_tensor **out, bbb_tensor *x, int ndim, const int64_t *shape);
int bbb_narrow(bbb_tensor **out, bbb_tensor *x, int dim, int64_t start, int64_t len);
int bbb_index_select(bbb_tensor **out, bbb_tensor *x, bbb_tensor *idx, int base);
int bbb_concat(bbb_tensor **out, bbb_tensor **xs, int n, int dim);
int bbb_transpose(bbb_tensor **out, bbb_tensor *x);
int bbb_copy(bbb_tensor **out, bbb_tensor *x);     /* differentiable clone */
int bbb_detach(bbb_tensor **out, bbb_tensor *x);   /* shares storage, no graph */

/* Convolution and pooling over NCHW tensors (ops_conv.c), PyTorch's
** F.conv2d conventions: weight (Cout, Cin/groups, kH, kW), index 0 is the
** height, 1 the width. */
typedef struct { int stride[2], pad[2], dil[2], groups; } bbb_conv_opts;
/* x (B, Cin, H, W), w (Cout, Cin/groups, kH, kW), b (Cout) or NULL:
** y (B, Cout, oH, oW) by im2col and sgemm, tiled over the batch so the
** im2col buffers stay under the workspace cap. */
int bbb_conv2d(bbb_tensor **out, bbb_tensor *x, bbb_tensor *w, bbb_tensor *b,
               const bbb_conv_opts *o);
/* The local reparameterization of a Bayesian convolution, fused:
** y = conv2d(x, mu) + b_mu + sqrt(conv2d(x^2, var) + b_var + 1e-16) eps, with
** eps (B, Cout, oH, oW); b_mu and b_var both given or both NULL. */
int bbb_conv2d_local(bbb_tensor **out, bbb_tensor *x, bbb_tensor *mu, bbb_tensor *var,
                     bbb_tensor *b_mu, bbb_tensor *b_var, bbb_tensor *eps, const bbb_conv_opts *o);
/* Flipout for a convolution, fused: y = conv2d(x, mu) + b +
** conv2d(x s_in, dw) s_out, signs s_in (B, Cin) and s_out (B, Cout) per image
** and channel (also as (B, C, 1, 1)). The noise takes no gradient. */
int bbb_conv2d_flipout(bbb_tensor **out, bbb_tensor *x, bbb_tensor *mu, bbb_tensor *dw,
                       bbb_tensor *b, bbb_tensor *s_in, bbb_tensor *s_out, const bbb_conv_opts *o);
/* The cap on conv2d's scratch memory per thread, in bytes (at least one
** image's worth is always used). Returns the previous cap; bytes <= 0 only reads it. */
int64_t bbb_conv_workspace(int64_t bytes);
/* Pooling windows: kernel, stride and padding; dil and groups unused. */
int bbb_max_pool2d(bbb_tensor **out, bbb_tensor *x, const int k[2], const bbb_conv_opts *o);
/* Average over the window, padding counted as zeros (PyTorch's default). */
int bbb_avg_pool2d(bbb_tensor **out, bbb_tensor *x, const int k[2], const bbb_conv_opts *o);
/* max_pool2d's 2x2 stride-2 kernels on (1) or off (0, the general loops
** for every window); on < 0 only reads. Returns the previous setting. */
int bbb_pool_fast_path(int on);

/* ---- kernels ----
** The arithmetic of the ops above on caller's buffers: the graph's ops run
** these, and so does every path that computes what an op computes without
** the graph (the fused step, mlp.c), so each formula is written once.
** Outputs first; a backward kernel adds (+=) its gradient to dx, which a
** caller zeroes first where the gradient is new (as the ops do). */

/* y (n) = -x (n); dx (n) += -dout (n). */
void bbb_neg_forward(bbb_float *y, const bbb_float *x, int64_t n);
void bbb_neg_backward(bbb_float *dx, const bbb_float *dout, int64_t n);
/* y (n) = x (n) + s; dx (n) += dout (n). */
void bbb_adds_forward(bbb_float *y, const bbb_float *x, bbb_float s, int64_t n);
void bbb_adds_backward(bbb_float *dx, const bbb_float *dout, int64_t n);
/* y (n) = x (n) * s; dx (n) += dout (n) * s. */
void bbb_muls_forward(bbb_float *y, const bbb_float *x, bbb_float s, int64_t n);
void bbb_muls_backward(bbb_float *dx, const bbb_float *dout, bbb_float s, int64_t n);
/* y (n) = x (n)^2; dx (n) += 2 x dout (n). */
void bbb_square_forward(bbb_float *y, const bbb_float *x, int64_t n);
void bbb_square_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *x, int64_t n);
/* y (n) = max(x (n), 0); dx (n) += dout (n) where x > 0. */
void bbb_relu_forward(bbb_float *y, const bbb_float *x, int64_t n);
void bbb_relu_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *x, int64_t n);

/* y (n) = a (n) op b (n), the binary ops over same-shaped operands. */
void bbb_add_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n);
void bbb_sub_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n);
void bbb_mul_forward(bbb_float *y, const bbb_float *a, const bbb_float *b, int64_t n);
/* One operand's gradient of a + b, a - b or a * b (same shapes) from dout
** (n): added to dx (n), or written when fresh (v + 0, the bits 0 + v would
** have), so a new gradient needs no zeroing pass. add: either operand of
** a + b, and a of a - b; sub: b of a - b; mul: either operand of a * b,
** other the other one. */
void bbb_add_backward(bbb_float *dx, const bbb_float *dout, int64_t n, int fresh);
void bbb_sub_backward(bbb_float *dx, const bbb_float *dout, int64_t n, int fresh);
void bbb_mul_backward(bbb_float *dx, const bbb_float *dout, const bbb_float *other, int64_t n,
                      int fresh);

/* The sum of x (n) in double, as sum() over all elements forms it: one pass
** below 65,536 elements, else fixed chunks added in order. */
double bbb_sum_floats(const bbb_float *x, int64_t n);
/* dx (n elements, stride apart) += dout: sum's gradient. */
void bbb_sum_backward(bbb_float *dx, bbb_float dout, int64_t n, int64_t stride);

/* out (B, o) = x (B, in) w^T (o, in) + b (o), or + 0 without b: the rows
** start at the bias and the product is added to them (bbb_gemm). */
void bbb_linear_forward(bbb_float *out, const bbb_float *x, const bbb_float *w, const bbb_float *b,
                        int64_t B, int64_t in, int64_t o);
/* db (o) += the column sums of dout (B, o), a row at a time: the bias's
** gradient. */
void bbb_bias_grad(bbb_float *db, const bbb_float *dout, int64_t B, int64_t o);

/* mask (n): inverted dropout's mask, 1 / (1 - p) with probability 1 - p,
** else 0 (p in [0, 1)): n uniforms from g, then a threshold pass. */
void bbb_dropout_mask(bbb_float *mask, bbb_rng *g, int64_t n, double p);

#endif
