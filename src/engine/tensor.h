/*
** tensor.h: float32 N-d tensors on refcounted storage (errors go through
** runtime.h's channel). Pure C: never includes lua.h.
*/
#ifndef BBB_TENSOR_H
#define BBB_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "engine/runtime.h"

#define BBB_MAXDIM 6

typedef float bbb_float;

typedef struct bbb_storage {
  bbb_float *data;
  int64_t size;        /* elements */
  int refcount;
  unsigned version;    /* bumped by every in-place write */
  /* The sum of squares of all size elements as bbb_sqnorm computes it, kept
  ** by the pass that wrote them: current while version == sq_version. */
  int sq_known;
  unsigned sq_version;
  double sq;
} bbb_storage;

typedef struct bbb_tensor {
  int refcount;
  int ndim;
  int64_t shape[BBB_MAXDIM];
  int64_t numel;
  int64_t offset;                /* into storage, in elements */
  bbb_storage *storage;
  /* State a layer above attaches (autograd: gradient, graph node, flags)
  ** and the function that frees it when the tensor dies. The tensor sits
  ** below autograd and must not know it: it only calls ext_free. */
  void *ext;
  void (*ext_free)(void *ext);
} bbb_tensor;

static inline bbb_float *bbb_data(const bbb_tensor *t) {
  return t->storage->data + t->offset;
}

/* Creation. All return NULL on failure with the message set. */
bbb_tensor *bbb_tensor_new(int ndim, const int64_t *shape);   /* uninitialised */
bbb_tensor *bbb_tensor_zeros(int ndim, const int64_t *shape);
bbb_tensor *bbb_tensor_full(int ndim, const int64_t *shape, bbb_float v);
bbb_tensor *bbb_tensor_zeros_like(const bbb_tensor *t);
bbb_tensor *bbb_tensor_clone(const bbb_tensor *t);            /* data copy, no graph */
bbb_tensor *bbb_tensor_view(bbb_tensor *t, int ndim, const int64_t *shape,
                            int64_t offset);                  /* shares storage */

void bbb_tensor_retain(bbb_tensor *t);
void bbb_tensor_release(bbb_tensor *t);   /* NULL is fine */

/* Shape helpers */
int bbb_shape_check(int ndim, const int64_t *shape, int64_t *numel);
int bbb_same_shape(const bbb_tensor *a, const bbb_tensor *b);
char *bbb_shape_str(const bbb_tensor *t, char *buf, size_t n);  /* "(2, 3)" */
/* Marks an in-place write (autograd checks the version of what it saved). */
static inline void bbb_tensor_touch(bbb_tensor *t) { t->storage->version++; }

/* Bytes of tensor storage currently allocated (for GC pressure and RSS checks). */
int64_t bbb_bytes_allocated(void);

#endif
