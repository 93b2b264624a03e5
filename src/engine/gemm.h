/*
** gemm.h: the time products take (gemm.c), and one product. bbb_gemm, the
** product cut into tiles over threads, is declared in ops.h.
*/
#ifndef BBB_GEMM_H
#define BBB_GEMM_H

#include <stdint.h>

/* A clock of the time spent in bbb_gemm on this thread, and of its calls:
** how much of a step its products take where they run. on = 1 starts it
** from zero, 0 stops it, -1 leaves it; returns the seconds so far (before
** a start) and sets *calls (may be NULL). Off until started; when off it
** costs one branch a product. */
double bbb_gemm_clock(int on, int64_t *calls);

/* c (m, n) = op(a) op(b) + beta c, row-major contiguous, as one call on
** this thread (bbb_gemm in ops.h cuts a product into tiles over threads). */
void bbb_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float beta, float *c);

#endif
