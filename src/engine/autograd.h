/*
** autograd.h: the define-by-run graph. Each op output that needs a gradient
** owns a node naming its op, its inputs (retained), what it saved for
** backward (a typed context) and a backward function. The graph lives on the
** tensors, so a forward pass that is never differentiated is freed with its
** outputs; backward() walks the nodes in reverse topological order,
** accumulates (+=) into .grad, and then releases the graph.
**
** A tensor's autograd state (gradient, node, flags) belongs to autograd.c:
** the tensor holds it as an opaque pointer with the function that frees it,
** both set here, so tensor.c frees it without knowing autograd.
*/
#ifndef BBB_AUTOGRAD_H
#define BBB_AUTOGRAD_H

#include "engine/tensor.h"

/* Every op that records a node. The unary, binary and reduction families
** add their own op code (ops.h) as the node's code. */
typedef enum {
  BBB_OP_UNARY, BBB_OP_BINARY, BBB_OP_REDUCE, BBB_OP_MATMUL, BBB_OP_LINEAR,
  BBB_OP_SOFTMAX, BBB_OP_LOG_SOFTMAX, BBB_OP_NLL, BBB_OP_RESHAPE, BBB_OP_COPY,
  BBB_OP_NARROW, BBB_OP_INDEX_SELECT, BBB_OP_CONCAT, BBB_OP_TRANSPOSE,
  BBB_OP_BAYES_SAMPLE, BBB_OP_BAYES_KL, BBB_OP_PRIOR_LOG_PROB,
  BBB_OP_CONV2D, BBB_OP_MAX_POOL2D, BBB_OP_AVG_POOL2D, BBB_OP_CONV2D_LOCAL,
  BBB_OP_CONV2D_FLIPOUT,
  BBB_OP_COUNT
} bbb_op;

/* Saved values of one op, each op's own struct (see the ops files); the
** node keeps a copy of at most this many bytes. */
#define BBB_CTX_BYTES 48

typedef struct bbb_node bbb_node;

/* Adds the gradient of the loss w.r.t. each input that requires it, given
** gout = d loss / d out. Uses bbb_grad_of() to get the input's buffer. */
typedef int (*bbb_backward_fn)(bbb_node *n, bbb_tensor *out, const bbb_float *gout);

struct bbb_node {
  bbb_op op;
  int code;                               /* the family's op code (ops.h), else 0 */
  bbb_backward_fn backward;
  unsigned out_version;
  unsigned saves;                         /* bit k: backward reads in[k]; bit 8: reads out */
  _Alignas(8) unsigned char ctx[BBB_CTX_BYTES];   /* the op's typed context */
  int nin;
  struct { bbb_tensor *t; unsigned version; } in[];   /* retained; NULL allowed */
};

#define BBB_SAVES_OUT 0x100u

/* The typed context of a node: `const narrow_ctx *c = bbb_node_ctx(n);` */
static inline void *bbb_node_ctx(bbb_node *n) { return n->ctx; }

/* Grad mode: no_grad regions record nothing. Returns the previous mode. */
int bbb_set_grad_enabled(int on);
int bbb_grad_enabled(void);

/* Called by an op after computing out. If grad mode is on and an input
** requires grad, attaches a node to out holding a copy of the ctx_size
** bytes at ctx (NULL for none) and returns it through *node (else NULL).
** code: the unary, binary or reduction op code for those families, else 0.
** saves: see above. */
int bbb_record(bbb_tensor *out, bbb_op op, int code, bbb_backward_fn fn, int nin, bbb_tensor **in,
               unsigned saves, const void *ctx, size_t ctx_size, bbb_node **node);

/* The node that made t (NULL for a leaf or a tensor outside any graph). */
bbb_node *bbb_node_of(const bbb_tensor *t);

/* The op name of t's node ("exp", "matmul", ...), NULL for a leaf. */
const char *bbb_grad_fn_name(const bbb_tensor *t);
const char *bbb_node_name(const bbb_node *n);

/* The gradient buffer of t during backward, zero-filled on first use. NULL
** if t does not require grad (the caller skips it) or on out-of-memory
** (*status is set). */
bbb_float *bbb_grad_of(bbb_tensor *t, int *status);

/* Like bbb_grad_of, but a buffer made by this call is left uninitialised and
** *fresh is set: the caller must then write every element (=, not +=). Saves
** a zero-filling pass over the big gradients. */
bbb_float *bbb_grad_begin(bbb_tensor *t, int *fresh, int *status);

/* Makes sure t's node runs in this backward pass even if no gradient
** reaches t, without a zero-filling pass: t gets a gradient buffer that
** reads as zeros (bbb_grad_of fills it then; bbb_grad_begin hands it out as
** fresh). For an op that hands its gradient to another node's pass. */
void bbb_grad_mark(bbb_tensor *t, int *status);

/* backward from root. seed may be NULL for a one-element root (seed 1).
** retain_graph keeps the nodes for a second backward. */
int bbb_backward(bbb_tensor *root, const bbb_tensor *seed, int retain_graph);

/* Marks t as a parameter (leaf). Fails on a non-leaf. */
int bbb_requires_grad(bbb_tensor *t, int on);
int bbb_tensor_requires_grad(const bbb_tensor *t);

/* t's accumulated gradient (borrowed), NULL if none. */
bbb_tensor *bbb_tensor_grad(const bbb_tensor *t);

/* Replaces t's gradient by a copy of g (NULL clears it). g must have t's
** shape. */
int bbb_grad_set(bbb_tensor *t, const bbb_tensor *g);

/* Zeroes t's gradient in place, if it has one. */
void bbb_grad_zero(bbb_tensor *t);

#endif
