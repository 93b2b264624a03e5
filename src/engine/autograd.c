/*
** autograd.c: a tensor's gradient state, recording nodes, and the
** reverse-mode walk.
*/
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/runtime.h"

/* What autograd keeps per tensor; allocated on first need. */
struct bbb_autograd {
  int requires_grad;
  int graph_freed;               /* its graph was released by backward() */
  bbb_tensor *grad;              /* accumulated gradient */
  int grad_unset;                /* grad allocated but never written: it reads as zeros */
  bbb_node *node;                /* the op that made it; NULL for leaves */
  unsigned visit;                /* scratch mark for graph walks */
};

static int grad_on = 1;
static unsigned visit_epoch;

/* t's state, NULL until autograd first needs it. */
static struct bbb_autograd *ag(const bbb_tensor *t) { return t->ext; }

static void ag_free(void *p);

static struct bbb_autograd *ag_get(bbb_tensor *t) {
  if (!t->ext) {
    t->ext = calloc(1, sizeof(struct bbb_autograd));
    t->ext_free = ag_free;
  }
  return t->ext;
}

static int requires(const bbb_tensor *t) { return ag(t) && ag(t)->requires_grad; }

/* Fills a gradient that bbb_grad_mark left unwritten with its zeros. */
static void settle(struct bbb_autograd *a) {
  if (a->grad && a->grad_unset) {
    memset(bbb_data(a->grad), 0, (size_t)a->grad->numel * sizeof(bbb_float));
    bbb_tensor_touch(a->grad);
    a->grad_unset = 0;
  }
}
static bbb_node *node_of(const bbb_tensor *t) { return ag(t) ? ag(t)->node : NULL; }

static void node_free(bbb_node *n) {
  if (!n) return;
  for (int k = 0; k < n->nin; k++) bbb_tensor_release(n->in[k].t);
  free(n);
}

/* The tensor's ext_free: runs when the tensor dies. */
static void ag_free(void *p) {
  struct bbb_autograd *a = p;
  node_free(a->node);
  bbb_tensor_release(a->grad);
  free(a);
}

int bbb_set_grad_enabled(int on) { int old = grad_on; grad_on = on; return old; }
int bbb_grad_enabled(void) { return grad_on; }

int bbb_tensor_requires_grad(const bbb_tensor *t) { return requires(t); }
bbb_tensor *bbb_tensor_grad(const bbb_tensor *t) {
  if (!ag(t)) return NULL;
  settle(ag(t));
  return ag(t)->grad;
}
bbb_node *bbb_node_of(const bbb_tensor *t) { return node_of(t); }

static const char *const op_names[] = {
  "unary", "binary", "reduce", "matmul", "linear", "softmax", "log_softmax", "nll",
  "reshape", "copy", "narrow", "index_select", "concat", "transpose",
  "bayes_sample", "bayes_kl", "prior_log_prob", "conv2d", "max_pool2d", "avg_pool2d",
  "conv2d_local", "conv2d_flipout",
};
_Static_assert(sizeof op_names / sizeof op_names[0] == BBB_OP_COUNT,
               "op_names must name every bbb_op");

const char *bbb_node_name(const bbb_node *n) {
  int code = n->code;
  switch (n->op) {
  case BBB_OP_UNARY: return code >= 0 && code < BBB_UNARY_COUNT ? bbb_unary_names[code] : "unary";
  case BBB_OP_BINARY: return code >= 0 && code < BBB_BINARY_COUNT ? bbb_binary_names[code] : "binary";
  case BBB_OP_REDUCE: return code >= 0 && code < BBB_REDUCE_COUNT ? bbb_reduce_names[code] : "reduce";
  default: return n->op < BBB_OP_COUNT ? op_names[n->op] : "?";
  }
}

const char *bbb_grad_fn_name(const bbb_tensor *t) {
  bbb_node *n = node_of(t);
  return n ? bbb_node_name(n) : NULL;
}

int bbb_record(bbb_tensor *out, bbb_op op, int code, bbb_backward_fn fn, int nin, bbb_tensor **in,
               unsigned saves, const void *ctx, size_t ctx_size, bbb_node **node) {
  int need = 0;
  if (node) *node = NULL;
  if (!grad_on) return BBB_OK;
  for (int k = 0; k < nin; k++)
    if (in[k] && requires(in[k])) need = 1;
  if (!need) return BBB_OK;
  if (ctx_size > BBB_CTX_BYTES)
    return bbb_error(BBB_EARG, "%s: context of %zu bytes exceeds %d", op_names[op], ctx_size,
                     BBB_CTX_BYTES);
  bbb_node *n = calloc(1, sizeof *n + (size_t)nin * sizeof n->in[0]);
  if (!n || !ag_get(out)) {
    free(n);
    return bbb_error(BBB_EMEM, "%s: out of memory recording the graph", op_names[op]);
  }
  n->op = op;
  n->code = code;
  n->backward = fn;
  n->nin = nin;
  n->saves = saves;
  if (ctx) memcpy(n->ctx, ctx, ctx_size);
  for (int k = 0; k < nin; k++) {
    n->in[k].t = in[k];
    if (in[k]) {
      bbb_tensor_retain(in[k]);
      n->in[k].version = in[k]->storage->version;
    }
  }
  n->out_version = out->storage->version;
  ag(out)->node = n;
  ag(out)->requires_grad = 1;
  if (node) *node = n;
  return BBB_OK;
}

bbb_float *bbb_grad_of(bbb_tensor *t, int *status) {
  if (!t || !requires(t)) return NULL;
  if (!ag(t)->grad) {
    ag(t)->grad = bbb_tensor_zeros(t->ndim, t->shape);
    if (!ag(t)->grad) { *status = bbb_errstatus(); return NULL; }
  }
  settle(ag(t));
  bbb_tensor_touch(ag(t)->grad);   /* the caller writes it */
  return bbb_data(ag(t)->grad);
}

void bbb_grad_mark(bbb_tensor *t, int *status) {
  if (!t || !requires(t) || ag(t)->grad) return;
  ag(t)->grad = bbb_tensor_new(t->ndim, t->shape);
  if (!ag(t)->grad) { *status = bbb_errstatus(); return; }
  ag(t)->grad_unset = 1;
}

bbb_float *bbb_grad_begin(bbb_tensor *t, int *fresh, int *status) {
  *fresh = 0;
  if (!t || !requires(t)) return NULL;
  if (!ag(t)->grad) {
    ag(t)->grad = bbb_tensor_new(t->ndim, t->shape);
    if (!ag(t)->grad) { *status = bbb_errstatus(); return NULL; }
    *fresh = 1;
  } else if (ag(t)->grad_unset) {
    ag(t)->grad_unset = 0;
    *fresh = 1;
  }
  bbb_tensor_touch(ag(t)->grad);   /* the caller writes it */
  return bbb_data(ag(t)->grad);
}

int bbb_grad_set(bbb_tensor *t, const bbb_tensor *g) {
  char s1[64], s2[64];
  if (g && !bbb_same_shape(g, t))
    return bbb_error(BBB_ESHAPE, "set_grad: gradient %s does not match tensor %s",
                     bbb_shape_str(g, s1, sizeof s1), bbb_shape_str(t, s2, sizeof s2));
  if (!g && !ag(t)) return BBB_OK;
  bbb_tensor *c = NULL;
  if (g && !(c = bbb_tensor_clone(g)))
    return bbb_error(BBB_EMEM, "set_grad: out of memory copying a gradient %s",
                     bbb_shape_str(g, s1, sizeof s1));
  if (!ag_get(t)) {
    bbb_tensor_release(c);
    return bbb_error(BBB_EMEM, "set_grad: out of memory");
  }
  bbb_tensor_release(ag(t)->grad);
  ag(t)->grad = c;
  ag(t)->grad_unset = 0;
  return BBB_OK;
}

void bbb_grad_zero(bbb_tensor *t) {
  bbb_tensor *g = bbb_tensor_grad(t);
  if (!g) return;
  memset(bbb_data(g), 0, (size_t)g->numel * sizeof(bbb_float));
  bbb_tensor_touch(g);
}

int bbb_requires_grad(bbb_tensor *t, int on) {
  bbb_node *n = node_of(t);
  if (n && !on)
    return bbb_error(BBB_EGRAPH, "requires_grad: cannot turn off on a tensor computed "
                     "by '%s'; use detach()", bbb_node_name(n));
  if (n) return BBB_OK;
  if (!on && !ag(t)) return BBB_OK;
  if (!ag_get(t)) return bbb_error(BBB_EMEM, "requires_grad: out of memory");
  ag(t)->requires_grad = on;
  return BBB_OK;
}

/* Post-order DFS over nodes with an explicit stack; returns the tensors in
** topological order (inputs before outputs). */
typedef struct { bbb_tensor **v; int n, cap; } tvec;

static int tvec_push(tvec *s, bbb_tensor *t) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    bbb_tensor **v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return BBB_EMEM;
    s->v = v; s->cap = cap;
  }
  s->v[s->n++] = t;
  return BBB_OK;
}

#define FREED_MSG "backward: the graph of this tensor was already freed by an earlier " \
  "backward() (pass retain_graph = true to keep it)"

/* Topological order of the tensors that need a gradient. An input whose
** own graph an earlier backward() freed would silently stop the gradient
** there: that is the freed-graph error, as for a freed root. */
static int topo_sort(bbb_tensor *root, tvec *order) {
  tvec stack = {0}; int st = BBB_OK;
  tvec child = {0};   /* parallel stack: next input index to visit */
  unsigned epoch = ++visit_epoch;
  ag(root)->visit = epoch;
  if (tvec_push(&stack, root) || tvec_push(&child, NULL)) st = BBB_EMEM;
  while (!st && stack.n > 0) {
    bbb_tensor *t = stack.v[stack.n - 1];
    intptr_t k = (intptr_t)child.v[child.n - 1];
    bbb_node *n = node_of(t);
    if (n && k < n->nin) {
      child.v[child.n - 1] = (bbb_tensor *)(k + 1);
      bbb_tensor *c = n->in[k].t;
      if (c && ag(c) && !ag(c)->requires_grad && ag(c)->graph_freed) {
        st = BBB_EGRAPH;
      } else if (c && requires(c) && ag(c)->visit != epoch) {
        ag(c)->visit = epoch;
        if (tvec_push(&stack, c) || tvec_push(&child, NULL)) st = BBB_EMEM;
      }
    } else {
      stack.n--; child.n--;
      if (tvec_push(order, t)) st = BBB_EMEM;
    }
  }
  free(stack.v); free(child.v);
  if (st == BBB_EGRAPH) return bbb_error(BBB_EGRAPH, FREED_MSG);
  return st ? bbb_error(BBB_EMEM, "backward: out of memory") : BBB_OK;
}

static int check_versions(bbb_node *n, bbb_tensor *out) {
  for (int k = 0; k < n->nin; k++)
    if (k < 8 && (n->saves >> k & 1) && n->in[k].t->storage->version != n->in[k].version)
      return bbb_error(BBB_EGRAPH, "backward: input %d of '%s' was modified in place "
                       "after it was used (version %u, expected %u)", k + 1, bbb_node_name(n),
                       n->in[k].t->storage->version, n->in[k].version);
  if ((n->saves & BBB_SAVES_OUT) && out->storage->version != n->out_version)
    return bbb_error(BBB_EGRAPH, "backward: the output of '%s' was modified in place "
                     "after it was used", bbb_node_name(n));
  return BBB_OK;
}

int bbb_backward(bbb_tensor *root, const bbb_tensor *seed, int retain_graph) {
  char b1[64], b2[64];
  if (!requires(root)) {
    if (ag(root) && ag(root)->graph_freed) return bbb_error(BBB_EGRAPH, FREED_MSG);
    return bbb_error(BBB_EGRAPH, "backward: tensor does not require grad "
                     "(no input of the computation was marked with requires_grad)");
  }
  if (seed && !bbb_same_shape(seed, root))
    return bbb_error(BBB_ESHAPE, "backward: seed gradient %s does not match tensor %s",
                     bbb_shape_str(seed, b1, sizeof b1), bbb_shape_str(root, b2, sizeof b2));
  if (!seed && root->numel != 1)
    return bbb_error(BBB_ESHAPE, "backward: tensor %s is not a scalar; pass a seed "
                     "gradient of the same shape", bbb_shape_str(root, b1, sizeof b1));
  tvec order = {0};
  int st = topo_sort(root, &order);
  /* Freeing a node releases its inputs: hold every tensor until the end. */
  for (int i = 0; i < order.n; i++) bbb_tensor_retain(order.v[i]);
  for (int i = 0; !st && i < order.n; i++)
    if (node_of(order.v[i])) st = check_versions(node_of(order.v[i]), order.v[i]);
  bbb_float *g = st ? NULL : bbb_grad_of(root, &st);
  if (g) {
    if (seed) for (int64_t i = 0; i < root->numel; i++) g[i] += bbb_data(seed)[i];
    else g[0] += 1;
  }
  /* Non-leaf grads live only during the walk; leaves keep theirs. */
  for (int i = order.n - 1; !st && i >= 0; i--) {
    bbb_tensor *t = order.v[i];
    if (bbb_interrupted()) st = bbb_error(BBB_EINTR, "backward: interrupted");
    else if (node_of(t) && ag(t)->grad) {
      settle(ag(t));   /* marked, but nothing flowed in: its gradient is zero */
      st = ag(t)->node->backward(ag(t)->node, t, bbb_data(ag(t)->grad));
    }
  }
  for (int i = order.n - 1; i >= 0; i--) {
    bbb_tensor *t = order.v[i];
    if (!node_of(t)) continue;
    bbb_tensor_release(ag(t)->grad);
    ag(t)->grad = NULL;
    ag(t)->grad_unset = 0;
    if (!retain_graph) {
      node_free(ag(t)->node);
      ag(t)->node = NULL;
      ag(t)->requires_grad = 0;
      ag(t)->graph_freed = 1;
    }
  }
  for (int i = 0; i < order.n; i++) bbb_tensor_release(order.v[i]);
  free(order.v);
  return st;
}
