/*
** optim.h: fused parameter updates, one pass over a parameter each, with
** their hyperparameters in one struct. gscale multiplies the gradient first
** (clipping by global norm).
*/
#ifndef BBB_OPTIM_H
#define BBB_OPTIM_H

#include "engine/tensor.h"

/* Sum of squares in double; NaN or inf if any element is not finite.
** Chunks of BBB_SUM_CHUNK elements are summed by bbb_sqnorm_chunk and
** added in order. For a tensor that covers its storage, a sum kept with
** bbb_sqnorm_keep by the pass that wrote it is returned while no write has
** happened since (the storage version says so). */
double bbb_sqnorm(const bbb_tensor *t);
double bbb_sqnorm_chunk(const bbb_float *x, int64_t lo, int64_t hi);

/* Keeps sq (which must be bbb_sqnorm's sum, made of bbb_sqnorm_chunk
** results) as t's sum of squares until t's storage is next written; nothing
** when t does not cover its storage. */
void bbb_sqnorm_keep(bbb_tensor *t, double sq);
int bbb_sqnorm_known(const bbb_tensor *t);

/* The hyperparameters of one update; each kind reads the fields it uses. */
typedef struct {
  double lr;             /* finite, >= 0 */
  double gscale;         /* gradient multiplier (clipping), finite, > 0 */
  double weight_decay;   /* L2 added to the gradient, finite, >= 0 */
  double momentum;       /* SGD: finite, >= 0 */
  int nesterov;          /* SGD */
  double beta1, beta2;   /* Adam: in [0, 1) */
  double alpha;          /* RMSprop: in [0, 1) */
  double eps;            /* Adam, RMSprop: finite, > 0 */
  int64_t step;          /* Adam: counts from 1 (bias correction) */
  double gmax;           /* a bound on every |g * gscale| (from the gradient's
                         ** norm); NaN when unknown */
} bbb_optim_hyper;

/* What an applied update wrote: the largest |p|, |first buffer| and |second
** buffer| (NaN if it wrote a NaN; 0 for an absent buffer), and the storage
** versions right after the write. While those versions are current, a dry
** run proves the next update finite from these numbers and gmax alone,
** without reading the tensors. */
typedef struct {
  int known;
  double p, a, b;
  unsigned vp, va, vb;
} bbb_optim_bound;

/* Checks the fields `kind` ("sgd", "adam", "rmsprop") uses; BBB_EARG names
** the first bad one. The updates below call it too. */
int bbb_optim_check(const char *kind, const bbb_optim_hyper *h);

/* Each update either applies itself (dry == 0), or, with dry != 0, changes
** nothing and stores in *nonfinite how many parameter values the update would
** make NaN or infinite: a caller checks every parameter first and applies
** the step only if all are clean. buf may be NULL when momentum is 0.
**
** bd (may be NULL) carries the bound between calls: an applied update fills
** it in; a dry run whose bound is current and proves the update finite
** stores 0 without a pass over the data, and otherwise counts exactly. An
** applied update runs to its end even on an interrupt. */
int bbb_sgd_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *buf,
                   const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite);
int bbb_adam_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *m, bbb_tensor *v,
                    const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite);
int bbb_rmsprop_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *sq,
                       const bbb_optim_hyper *h, bbb_optim_bound *bd, int dry, int64_t *nonfinite);

#endif
