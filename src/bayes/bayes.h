/*
** bayes.h: the fused Bayesian pieces. bbb_bayes_sample draws
** w = mu + softplus(rho) * eps in one pass over the weights and, in the same
** pass, the complexity term log q(w) - log p(w) for a C prior. Its backward is
** one more pass giving grad mu and grad rho from grad w and the complexity
** term's weight. With the GEMMs of linear() around it, a Bayesian layer costs
** one GEMM and one pass forward, two GEMMs and one pass backward.
*/
#ifndef BBB_BAYES_H
#define BBB_BAYES_H

#include "engine/rng.h"
#include "engine/tensor.h"

typedef enum {
  BBB_PRIOR_NONE,        /* log q only: the prior is added outside (Lua priors) */
  BBB_PRIOR_GAUSSIAN,    /* N(0, sigma1^2) */
  BBB_PRIOR_MIXTURE,     /* pi N(0, sigma1^2) + (1 - pi) N(0, sigma2^2) */
  BBB_PRIOR_LAPLACE      /* Laplace(0, b = sigma1) */
} bbb_prior_kind;

typedef struct {
  int kind;
  double pi, sigma1, sigma2;
} bbb_prior;

/* Checks the parameters: sigmas > 0 and finite, 0 < pi < 1. */
int bbb_prior_check(const bbb_prior *p);

/* Sum of log p(w) over the elements of w, differentiable in w. */
int bbb_prior_log_prob(bbb_tensor **out, const bbb_prior *p, bbb_tensor *w);

/* What bbb_bayes_sample hands on, beside the complexity term of the sample
** w = mu + sigma eps: w itself (the weight estimator), sigma^2 (local
** reparameterization's variances) or sigma eps (flipout's perturbation).
** The other two spare the passes and buffers of forming them from w or rho. */
typedef enum { BBB_SAMPLE_W = 0, BBB_SAMPLE_VAR = 1, BBB_SAMPLE_DELTA = 2 } bbb_sample_out;

/* w: same shape as mu and rho, what out asks for (w, sigma^2 or sigma eps);
** kl: 0-d, log q(w) - log p(w) summed (log q alone for BBB_PRIOR_NONE).
** eps, when given, is used instead of drawing from g (tests inject it);
** otherwise g's counter advances by mu's size. */
int bbb_bayes_sample(bbb_tensor **w, bbb_tensor **kl, bbb_tensor *mu, bbb_tensor *rho,
                     const bbb_prior *p, bbb_rng *g, bbb_tensor *eps, int out);

/* The same passes without the graph, over n weights in caller's buffers,
** for a fused training step (mlp.c). bbb_bayes_sample_into writes
** w = mu + softplus(rho) eps and the complexity term as the op's output
** holds it (kept: n floats the mixture's backward reads, else unused);
** bbb_bayes_backward_into writes grad mu and grad rho (=, not +=) from the
** likelihood's grad w and the complexity term's weight gkl, with their sums
** of squares as bbb_sqnorm would form them. The bits are the op's. */
int bbb_bayes_sample_into(bbb_float *w, bbb_float *kl, const bbb_float *mu, const bbb_float *rho,
                          const bbb_float *eps, bbb_float *kept, int64_t n, const bbb_prior *p);
int bbb_bayes_backward_into(bbb_float *gmu, bbb_float *grho, double *sqmu, double *sqrho,
                            const bbb_float *mu, const bbb_float *rho, const bbb_float *eps,
                            const bbb_float *gw, const bbb_float *kept, int64_t n, const bbb_prior *p,
                            bbb_float gkl);

#endif
