/*
** linalg.h: the symmetric eigendecomposition under the Laplace
** approximation (bbb.laplace), by LAPACK's dsyevd in OpenBLAS. Pure C:
** never includes lua.h.
*/
#ifndef BBB_LINALG_H
#define BBB_LINALG_H

#include "engine/tensor.h"

/* The eigenvalues (ascending, into values[0..n-1], which the caller
** allocates) and eigenvectors (*vectors, a new (n, n) tensor whose column j
** goes with values[j]) of a symmetric matrix, in double precision from the
** float32 input to the double results. gram = 0: x is (n, n) and its
** symmetric part (x + x^T) / 2 is taken; gram = 1: x is (N, n) and the
** matrix is x^T x, formed in double, so rows of large or nearly collinear
** features lose nothing to float32 sums. x must be finite. */
int bbb_eigh(double *values, bbb_tensor **vectors, const bbb_tensor *x, int gram);
/* The same for the symmetric part of a row-major (n, n) matrix of doubles,
** which it overwrites. a must be finite. */
int bbb_eigh_doubles(double *values, bbb_tensor **vectors, double *a, int64_t n);

#endif
