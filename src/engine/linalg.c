/*
** linalg.c: bbb_eigh. LAPACK's divide-and-conquer dsyevd does the O(n^3)
** work in blocked BLAS, which no loop in Lua comes near once n reaches the
** width of a hidden layer. OpenBLAS runs it on one thread (parallel.c), so
** its numbers do not depend on the thread count.
*/
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/linalg.h"
#include "engine/parallel.h"

/* LAPACK's Fortran entry (OpenBLAS ships LAPACK but not LAPACKE), with the
** hidden lengths gfortran passes for its two character arguments. */
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
             double *w, double *work, const int *lwork, int *iwork, const int *liwork, int *info,
             size_t jobz_len, size_t uplo_len);

/* Well below the order at which the workspace, 2 n^2 doubles, overflows
** LAPACK's 32-bit integers. */
#define MAX_ORDER 16384
/* Rows of x turned to double per rank-k update of the Gram matrix: the
** copy stays small whatever N is. */
#define GRAM_ROWS 256

static int check_finite(const bbb_tensor *x) {
  const float *p = bbb_data(x);
  int64_t cols = x->shape[1];
  for (int64_t i = 0; i < x->numel; i++)
    if (!isfinite(p[i]))
      return bbb_error(BBB_EVALUE, "eigh: x holds %g at (%lld, %lld)", (double)p[i],
                       (long long)(i / cols + 1), (long long)(i % cols + 1));
  return BBB_OK;
}

/* a = x^T x in double; dsyrk fills the upper triangle of the row-major a,
** which is the lower one of the column-major matrix LAPACK reads. */
static int gram_of(double *a, const bbb_tensor *x) {
  int64_t N = x->shape[0], n = x->shape[1];
  const float *src = bbb_data(x);
  double *block = malloc(sizeof(double) * GRAM_ROWS * (size_t)n);
  if (!block) return bbb_error(BBB_EMEM, "eigh: out of memory for a block of %d rows", GRAM_ROWS);
  memset(a, 0, sizeof(double) * (size_t)(n * n));
  for (int64_t r = 0; r < N; r += GRAM_ROWS) {
    int64_t m = N - r < GRAM_ROWS ? N - r : GRAM_ROWS;
    for (int64_t i = 0; i < m * n; i++) block[i] = src[r * n + i];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)m, 1.0, block, (int)n, 1.0, a,
                (int)n);
  }
  free(block);
  return BBB_OK;
}

static void symmetric_part(double *a, const bbb_tensor *x) {
  int64_t n = x->shape[0];
  const float *p = bbb_data(x);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) a[i * n + j] = 0.5 * ((double)p[i * n + j] + (double)p[j * n + i]);
}

/* dsyevd on the column-major a (n, n): values into w, vectors over a. */
static int solve(double *a, double *w, int n) {
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0;
  dsyevd_("V", "L", &n, a, &n, w, &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
  if (info != 0) return bbb_error(BBB_EARG, "eigh: LAPACK refused the workspace query (info %d)", info);
  lwork = (int)work_size;
  liwork = iwork_size;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  int *iwork = malloc(sizeof(int) * (size_t)liwork);
  if (!work || !iwork) {
    free(work);
    free(iwork);
    return bbb_error(BBB_EMEM, "eigh: out of memory for the workspace of a %d x %d matrix", n, n);
  }
  dsyevd_("V", "L", &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  free(work);
  free(iwork);
  if (info != 0) return bbb_error(BBB_EVALUE, "eigh: the eigensolver did not converge (info %d)", info);
  return BBB_OK;
}

/* The vectors of the column-major a as the columns of a new row-major
** (n, n) tensor. */
static int vectors_of(bbb_tensor **vectors, const double *a, int64_t n) {
  int64_t shape[2] = { n, n };
  bbb_tensor *v = bbb_tensor_new(2, shape);
  if (!v) return bbb_errstatus();
  float *out = bbb_data(v);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) out[i * n + j] = (float)a[j * n + i];
  *vectors = v;
  return BBB_OK;
}

static int decompose(double *values, bbb_tensor **vectors, double *a, int64_t n) {
  bbb_threads_asked();   /* OpenBLAS set to one thread before its first call */
  int st = n > 0 ? solve(a, values, (int)n) : BBB_OK;
  return st ? st : vectors_of(vectors, a, n);
}

static int check_order(int64_t n) {
  if (n > MAX_ORDER)
    return bbb_error(BBB_ESHAPE, "eigh: order %lld is too large (at most %d)", (long long)n, MAX_ORDER);
  return BBB_OK;
}

static double *new_matrix(int64_t n) {
  double *a = malloc(sizeof(double) * (size_t)(n * n > 0 ? n * n : 1));
  if (!a) bbb_error(BBB_EMEM, "eigh: out of memory for a %lld x %lld matrix", (long long)n, (long long)n);
  return a;
}

int bbb_eigh(double *values, bbb_tensor **vectors, const bbb_tensor *x, int gram) {
  *vectors = NULL;
  if (x->ndim != 2 || (!gram && x->shape[0] != x->shape[1])) {
    char buf[64];
    return bbb_error(BBB_ESHAPE, "eigh: x must be a %s matrix, got %s",
                     gram ? "2-d" : "square", bbb_shape_str(x, buf, sizeof buf));
  }
  int64_t n = x->shape[1];
  int st = check_order(n);
  if (!st) st = check_finite(x);
  if (st) return st;
  double *a = new_matrix(n);
  if (!a) return BBB_EMEM;
  if (gram) st = gram_of(a, x);
  else symmetric_part(a, x);
  if (!st) st = decompose(values, vectors, a, n);
  free(a);
  return st;
}

int bbb_eigh_doubles(double *values, bbb_tensor **vectors, double *a, int64_t n) {
  *vectors = NULL;
  int st = check_order(n);
  if (st) return st;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double v = a[i * n + j];
      if (!isfinite(v))
        return bbb_error(BBB_EVALUE, "eigh: a holds %g at (%lld, %lld)", v, (long long)(i + 1),
                         (long long)(j + 1));
      if (j < i) a[i * n + j] = a[j * n + i] = 0.5 * (v + a[j * n + i]);
    }
  return decompose(values, vectors, a, n);
}
