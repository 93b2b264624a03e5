/*
** autograd.c: recording nodes and the reverse-mode walk.
*/
#include <stdlib.h>
#include <string.h>

#include "autograd.h"

static int grad_on = 1;
static unsigned visit_epoch;

int bbb_set_grad_enabled(int on) { int old = grad_on; grad_on = on; return old; }
int bbb_grad_enabled(void) { return grad_on; }

int bbb_record(bbb_tensor *out, const char *op, bbb_backward_fn fn, int nin,
               bbb_tensor **in, unsigned saves, bbb_node **node) {
  int need = 0;
  if (node) *node = NULL;
  if (!grad_on) return BBB_OK;
  for (int k = 0; k < nin; k++)
    if (in[k] && in[k]->requires_grad) need = 1;
  if (!need) return BBB_OK;
  bbb_node *n = calloc(1, sizeof *n + (size_t)nin * sizeof n->in[0]);
  if (!n) return bbb_error(BBB_EMEM, "%s: out of memory recording the graph", op);
  n->op = op;
  n->backward = fn;
  n->nin = nin;
  n->saves = saves;
  for (int k = 0; k < nin; k++) {
    n->in[k].t = in[k];
    if (in[k]) {
      bbb_tensor_retain(in[k]);
      n->in[k].version = in[k]->storage->version;
    }
  }
  n->out_version = out->storage->version;
  out->node = n;
  out->requires_grad = 1;
  if (node) *node = n;
  return BBB_OK;
}

void bbb_node_free(bbb_node *n) {
  if (!n) return;
  for (int k = 0; k < n->nin; k++) bbb_tensor_release(n->in[k].t);
  free(n);
}

bbb_float *bbb_grad_of(bbb_tensor *t, int *status) {
  if (!t || !t->requires_grad) return NULL;
  if (!t->grad) {
    t->grad = bbb_tensor_zeros(t->ndim, t->shape);
    if (!t->grad) { *status = BBB_EMEM; return NULL; }
  }
  return bbb_data(t->grad);
}

bbb_float *bbb_grad_begin(bbb_tensor *t, int *fresh, int *status) {
  *fresh = 0;
  if (!t || !t->requires_grad) return NULL;
  if (!t->grad) {
    t->grad = bbb_tensor_new(t->ndim, t->shape);
    if (!t->grad) { *status = BBB_EMEM; return NULL; }
    *fresh = 1;
  }
  return bbb_data(t->grad);
}

int bbb_grad_set(bbb_tensor *t, const bbb_tensor *g) {
  char s1[64], s2[64];
  if (g && !bbb_same_shape(g, t))
    return bbb_error(BBB_ESHAPE, "set_grad: gradient %s does not match tensor %s",
                     bbb_shape_str(g, s1, sizeof s1), bbb_shape_str(t, s2, sizeof s2));
  bbb_tensor *c = NULL;
  if (g && !(c = bbb_tensor_clone(g)))
    return bbb_error(BBB_EMEM, "set_grad: out of memory copying a gradient %s",
                     bbb_shape_str(g, s1, sizeof s1));
  bbb_tensor_release(t->grad);
  t->grad = c;
  return BBB_OK;
}

void bbb_grad_zero(bbb_tensor *t) {
  if (!t->grad) return;
  memset(bbb_data(t->grad), 0, (size_t)t->grad->numel * sizeof(bbb_float));
  bbb_tensor_touch(t->grad);
}

int bbb_requires_grad(bbb_tensor *t, int on) {
  if (t->node && !on)
    return bbb_error(BBB_EGRAPH, "requires_grad: cannot turn off on a tensor computed "
                     "by '%s'; use detach()", t->node->op);
  if (!t->node) t->requires_grad = on;
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

static int topo_sort(bbb_tensor *root, tvec *order) {
  tvec stack = {0}; int st = BBB_OK;
  tvec child = {0};   /* parallel stack: next input index to visit */
  unsigned epoch = ++visit_epoch;
  root->visit = epoch;
  if (tvec_push(&stack, root) || tvec_push(&child, NULL)) st = BBB_EMEM;
  while (!st && stack.n > 0) {
    bbb_tensor *t = stack.v[stack.n - 1];
    intptr_t k = (intptr_t)child.v[child.n - 1];
    bbb_node *n = t->node;
    if (n && k < n->nin) {
      child.v[child.n - 1] = (bbb_tensor *)(k + 1);
      bbb_tensor *c = n->in[k].t;
      if (c && c->requires_grad && c->visit != epoch) {
        c->visit = epoch;
        if (tvec_push(&stack, c) || tvec_push(&child, NULL)) st = BBB_EMEM;
      }
    } else {
      stack.n--; child.n--;
      if (tvec_push(order, t)) st = BBB_EMEM;
    }
  }
  free(stack.v); free(child.v);
  return st ? bbb_error(BBB_EMEM, "backward: out of memory") : BBB_OK;
}

static int check_versions(bbb_node *n, bbb_tensor *out) {
  for (int k = 0; k < n->nin; k++)
    if (k < 8 && (n->saves >> k & 1) && n->in[k].t->storage->version != n->in[k].version)
      return bbb_error(BBB_EGRAPH, "backward: input %d of '%s' was modified in place "
                       "after it was used (version %u, expected %u)", k + 1, n->op,
                       n->in[k].t->storage->version, n->in[k].version);
  if ((n->saves & BBB_SAVES_OUT) && out->storage->version != n->out_version)
    return bbb_error(BBB_EGRAPH, "backward: the output of '%s' was modified in place "
                     "after it was used", n->op);
  return BBB_OK;
}

int bbb_backward(bbb_tensor *root, const bbb_tensor *seed, int retain_graph) {
  char b1[64], b2[64];
  if (!root->requires_grad) {
    if (root->graph_freed)
      return bbb_error(BBB_EGRAPH, "backward: the graph of this tensor was already "
                       "freed by an earlier backward() (pass retain_graph = true to keep it)");
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
    if (order.v[i]->node) st = check_versions(order.v[i]->node, order.v[i]);
  bbb_float *g = st ? NULL : bbb_grad_of(root, &st);
  if (g) {
    if (seed) for (int64_t i = 0; i < root->numel; i++) g[i] += bbb_data(seed)[i];
    else g[0] += 1;
  }
  /* Non-leaf grads live only during the walk; leaves keep theirs. */
  for (int i = order.n - 1; !st && i >= 0; i--) {
    bbb_tensor *t = order.v[i];
    if (t->node && t->grad) st = t->node->backward(t->node, t, bbb_data(t->grad));
  }
  for (int i = order.n - 1; i >= 0; i--) {
    bbb_tensor *t = order.v[i];
    if (!t->node) continue;
    bbb_tensor_release(t->grad);
    t->grad = NULL;
    if (!retain_graph) {
      bbb_node_free(t->node);
      t->node = NULL;
      t->requires_grad = 0;
      t->graph_freed = 1;
    }
  }
  for (int i = 0; i < order.n; i++) bbb_tensor_release(order.v[i]);
  free(order.v);
  return st;
}
