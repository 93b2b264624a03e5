/*
** optim.h: fused parameter updates, one pass over a parameter each. gscale
** multiplies the gradient first (clipping by global norm).
*/
#ifndef BBB_OPTIM_H
#define BBB_OPTIM_H

#include "tensor.h"

/* Sum of squares in double; NaN or inf if any element is not finite. */
double bbb_sqnorm(const bbb_tensor *t);

/* buf may be NULL when momentum is 0. */
int bbb_sgd_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *buf, double gscale,
                   double lr, double momentum, int nesterov, double weight_decay);

/* step counts from 1 (bias correction). */
int bbb_adam_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *m, bbb_tensor *v,
                    double gscale, double lr, double beta1, double beta2, double eps,
                    double weight_decay, int64_t step);

int bbb_rmsprop_update(bbb_tensor *p, const bbb_tensor *g, bbb_tensor *sq, double gscale,
                       double lr, double alpha, double eps, double weight_decay);

#endif
