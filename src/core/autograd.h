/*
** autograd.h: the define-by-run graph. Each op output that needs a gradient
** owns a node naming its inputs (retained) and a backward function. The graph
** lives on the tensors, so a forward pass that is never differentiated is
** freed with its outputs; backward() walks the nodes in reverse topological
** order, accumulates (+=) into .grad, and then releases the graph.
*/
#ifndef BBB_AUTOGRAD_H
#define BBB_AUTOGRAD_H

#include "tensor.h"

/* Elementwise loops go parallel from this many elements on. */
#define BBB_PAR_MIN 32768

typedef struct bbb_node bbb_node;

/* Adds the gradient of the loss w.r.t. each input that requires it, given
** gout = d loss / d out. Uses bbb_grad_of() to get the input's buffer. */
typedef int (*bbb_backward_fn)(bbb_node *n, bbb_tensor *out, const bbb_float *gout);

struct bbb_node {
  const char *op;                         /* for messages */
  bbb_backward_fn backward;
  unsigned out_version;
  unsigned saves;                         /* bit k: backward reads in[k]; bit 8: reads out */
  double f[4];                            /* op parameters */
  int64_t i[4];
  int nin;
  struct { bbb_tensor *t; unsigned version; } in[];   /* retained; NULL allowed */
};

#define BBB_SAVES_OUT 0x100u

/* Grad mode: no_grad regions record nothing. Returns the previous mode. */
int bbb_set_grad_enabled(int on);
int bbb_grad_enabled(void);

/* Called by an op after computing out. If grad mode is on and an input
** requires grad, attaches a node to out (and returns it through *node, else
** NULL) so the op can store its parameters. saves: see above. */
int bbb_record(bbb_tensor *out, const char *op, bbb_backward_fn fn, int nin,
               bbb_tensor **in, unsigned saves, bbb_node **node);

void bbb_node_free(bbb_node *n);

/* The gradient buffer of t during backward, zero-filled on first use. NULL
** if t does not require grad (the caller skips it) or on out-of-memory
** (*status is set). */
bbb_float *bbb_grad_of(bbb_tensor *t, int *status);

/* Like bbb_grad_of, but a buffer made by this call is left uninitialised and
** *fresh is set: the caller must then write every element (=, not +=). Saves
** a zero-filling pass over the big gradients. */
bbb_float *bbb_grad_begin(bbb_tensor *t, int *fresh, int *status);

/* backward from root. seed may be NULL for a one-element root (seed 1).
** retain_graph keeps the nodes for a second backward. */
int bbb_backward(bbb_tensor *root, const bbb_tensor *seed, int retain_graph);

/* Replaces t's gradient by a copy of g (NULL clears it). g must have t's
** shape. */
int bbb_grad_set(bbb_tensor *t, const bbb_tensor *g);

/* Zeroes t's gradient in place, if it has one. */
void bbb_grad_zero(bbb_tensor *t);

/* Marks t as a parameter (leaf). Fails on a non-leaf. */
int bbb_requires_grad(bbb_tensor *t, int on);

#endif
