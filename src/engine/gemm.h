/*
** gemm.h: which code forms matrix products (gemm.c), and one product.
*/
#ifndef BBB_GEMM_H
#define BBB_GEMM_H

#include <stdint.h>

enum {
  BBB_GEMM_OPENBLAS,   /* OpenBLAS, with the kernels it picked for the CPU (the default) */
  BBB_GEMM_HASWELL,    /* the rounding of OpenBLAS 0.3.21's Haswell kernel on any CPU:
                          gemm.c's kernel (AVX2 and FMA), else its plain loops */
  BBB_GEMM_REFERENCE,  /* the same rounding, always by the plain loops (the kernel's check) */
  BBB_GEMM_KINDS
};

/* Sets the kind (when kind >= 0) and returns the one before. */
int bbb_gemm_kind(int kind);

/* Whether BBB_GEMM_HASWELL runs on gemm.c's kernel here (the CPU has AVX2
** and FMA), not on the plain loops. */
int bbb_gemm_own_kernel(void);

/* A clock of the time spent in bbb_gemm on this thread, and of its calls:
** how much of a step its products take where they run. on = 1 starts it
** from zero, 2 too and counts terms, 0 stops it, -1 leaves it; returns the
** seconds so far (before a start) and sets *calls and terms[0..1] (either
** may be NULL). terms counts the products' terms op(a)[i][l] op(b)[l][j]
** with op(a)'s factor nonzero (terms[0]: what a kernel skipping op(a)'s
** zeros forms) and with both nonzero (terms[1]: what no kernel with the
** recorded roundings can skip), by a pass over each product's inputs after
** its time is taken; -1 when not counted, or a count ran out of memory.
** Off until started; when off it costs one branch a product. */
double bbb_gemm_clock(int on, int64_t *calls, int64_t terms[2]);

/* c (m, n) = op(a) op(b) + beta c, row-major contiguous, as one call on
** this thread (bbb_gemm in ops.h cuts a product into tiles over threads). */
void bbb_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float beta, float *c);

#endif
