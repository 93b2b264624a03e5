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

/* The C priors, a row each: X(ID, name, "Label", keeps, parameters...).
** A new prior is its row here and its functions in bayes.c (doc/library.md,
** "Adding a C prior"): the enum, the kinds and parameter names the binding
** reads and hands to Lua, the checks, and every dispatch over the kind
** (each loop specialised per kind at compile time) follow from this list.
**   ID         the enum constant BBB_PRIOR_ID
**   name       the kind in Lua ({kind = "gaussian"}), and the stem of the
**              functions bayes.c defines for it: name_consts, name_logp,
**              name_dlogp (and with keeps, name_logp_sum, name_dlogp_kept)
**   Label      the prior in messages and in bbb.prior.describe
**   keeps      1: the sample pass stores a float per weight that the
**              backward pass reads back (the mixture's exponential), else 0
**   parameters BBB_SCALE(field) (finite, > 0) or BBB_UNIT(field) (in (0, 1)):
**              the fields of the Lua table, in the order bbb_prior's par[]
**              holds them and describe shows them */
#define BBB_PRIORS(X)                                                                    \
  X(GAUSSIAN, gaussian, "Gaussian", 0, BBB_SCALE(sigma))     /* N(0, sigma^2) */          \
  X(MIXTURE, mixture, "ScaleMixture", 1, BBB_UNIT(pi), BBB_SCALE(sigma1), BBB_SCALE(sigma2)) \
  X(LAPLACE, laplace, "Laplace", 0, BBB_SCALE(b))            /* Laplace(0, b) */

#define BBB_PRIOR_ENUM_(ID, ...) BBB_PRIOR_##ID,
typedef enum {
  BBB_PRIOR_NONE,        /* log q only: the prior is added outside (Lua priors) */
  BBB_PRIORS(BBB_PRIOR_ENUM_)
  BBB_PRIOR_COUNT
} bbb_prior_kind;
#undef BBB_PRIOR_ENUM_

#define BBB_PRIOR_MAXPAR 3

/* What a parameter must be. The checks, and the binding's reads, take the
** scales first and then the weights, each in the row's order: the mixture's
** row lists pi first, as describe shows it, and a table wrong in both is
** still refused for its sigma, as it always was. */
enum { BBB_PAR_SCALE, BBB_PAR_UNIT };
#define BBB_SCALE(field) { #field, BBB_PAR_SCALE }
#define BBB_UNIT(field) { #field, BBB_PAR_UNIT }

typedef struct { const char *name; int rule; } bbb_prior_param;

/* A row of BBB_PRIORS. */
typedef struct {
  const char *name, *label;
  int keeps, npar;
  bbb_prior_param par[BBB_PRIOR_MAXPAR];
} bbb_prior_info;

typedef struct {
  int kind;
  double par[BBB_PRIOR_MAXPAR];   /* in the order of the kind's row */
} bbb_prior;

/* The row of a kind of BBB_PRIORS, NULL for BBB_PRIOR_NONE or another int. */
const bbb_prior_info *bbb_prior_info_of(int kind);

/* The kind named name ("none" included), -1 for none of them. */
int bbb_prior_kind_named(const char *name);

/* The index in par[] of the i-th parameter to read and check. */
int bbb_prior_param_at(const bbb_prior_info *in, int i);

/* Checks the parameters against their rules. */
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
** holds it (kept: n floats for a prior whose row keeps, the mixture, that
** the backward reads back, else unused);
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
