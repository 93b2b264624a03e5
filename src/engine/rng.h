/*
** rng.h: counter-based random numbers (Philox4x32-10). A generator is an
** explicit object: a 64-bit key from the seed plus a 64-bit counter. Element i
** of a draw depends only on (key, counter + i/4), so the same seed gives the
** same numbers whatever the thread count. Each draw advances the counter.
*/
#ifndef BBB_RNG_H
#define BBB_RNG_H

#include <stdint.h>
#include "engine/tensor.h"

typedef struct bbb_rng {
  uint64_t seed;
  uint64_t counter;   /* in blocks of 4 x 32 bits */
} bbb_rng;

void bbb_rng_init(bbb_rng *g, uint64_t seed);

/* One Philox4x32-10 block: out = philox(ctr, key). */
void bbb_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Fill n floats; advance the counter. uniform in [lo, hi) (never hi), normal
** N(mean, std^2) by Box-Muller on counter output. Parallel (OpenMP) and
** vectorisable; results identical for any thread count. */
void bbb_rng_uniform(bbb_rng *g, bbb_float *out, int64_t n, bbb_float lo, bbb_float hi);
void bbb_rng_normal(bbb_rng *g, bbb_float *out, int64_t n, bbb_float mean, bbb_float std);

#endif
