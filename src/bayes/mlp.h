/*
** mlp.h: one training step's gradient of a ReLU network of dense layers
** without the graph. The layers are plain (weight, bias), optionally with
** inverted dropout after a hidden layer's ReLU, or Bayesian (a Gaussian
** posterior sampled once per pass, w = mu + softplus(rho) eps, with a C
** prior); the loss is the ELBO of a Gaussian likelihood with a fixed
** noise, per example:
**   (nll + kl_weight (log q(w) - log p(w))) / B,
**   nll = -sum log N(y | f(x), sigma^2).
** Each part runs the kernel the graph's op runs, in the graph's order and
** with its roundings, into buffers kept from one step to the next, so the
** loss and every gradient have the bits of
**   zero_grad(); elbo:loss(net, x, y):backward()
** (tests/fused_spec.lua holds them to it) at a fraction of the cost for a
** small network: no tensor, node or Lua call per op.
*/
#ifndef BBB_MLP_H
#define BBB_MLP_H

#include "bayes/bayes.h"
#include "engine/rng.h"
#include "engine/tensor.h"

#define BBB_MLP_MAX_LAYERS 16

typedef struct {
  bbb_tensor *w, *b;                   /* plain: weight (out, in), bias (out) or NULL */
  bbb_tensor *wmu, *wrho, *bmu, *brho; /* Bayesian: the posterior (bias pair may be NULL) */
  bbb_prior prior;
  double dropout;                      /* > 0: inverted dropout after this layer's ReLU */
} bbb_mlp_layer;

typedef struct {
  int n;                               /* layers; ReLU between them, none after the last */
  int bayes;
  bbb_mlp_layer layer[BBB_MLP_MAX_LAYERS];
  bbb_rng *gen;                        /* the Bayesian layers' noise, the dropout masks */
  bbb_float *ws;                       /* workspace, grown as needed */
  int64_t ws_len;
} bbb_mlp;

/* The step's terms, as the graph's 0-d tensors hold them. */
typedef struct { bbb_float nll, kl, loss; } bbb_mlp_terms;

/* Checks the layers' shapes (each layer's input width is the last one's
** output width; the parameters require grad). */
int bbb_mlp_check(const bbb_mlp *m);

/* x (B, in), y (B * out values): the loss, and every parameter's gradient
** set (written, not added to). sigma > 0 the likelihood's noise. */
int bbb_mlp_grad(bbb_mlp *m, const bbb_tensor *x, const bbb_tensor *y, double sigma, double kl_weight,
                 bbb_mlp_terms *terms);

void bbb_mlp_free(bbb_mlp *m);

#endif
