/*
** gemm.c: bbb_gemm, the GEMM under matmul, linear and the fused step, and
** bbb_sgemm, one call of it (convolutions). Every product is OpenBLAS's.
**
** OpenBLAS picks its kernels by CPU and version, so the last bits of a run
** belong to the environment it ran in: a results file records the OpenBLAS
** version and core type, and replaying it exactly means pinning both (see
** doc/guide.md). What bbb does promise is that the bits do not depend on
** the number of threads: a product is cut into tiles by its shape alone,
** and each tile is one single-thread call.
*/
#include <cblas.h>

#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

#define TILES 4        /* bbb_gemm's cut (see there) */
#define MIN_TILE 32

typedef struct {
  int ta, tb;
  int64_t m, n, k, tm, tn;   /* c is (m, n), cut into calls of tm rows or tn columns */
  const float *a, *b;
  float beta;
  float *c;
} gemm_ctx;

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* The call for tile t (rows or columns, as the product is cut). */
static void tile(void *p, int64_t t, int64_t t1) {
  const gemm_ctx *u = p;
  (void)t1;
  int by_rows = u->tm < u->m;
  int64_t lo = t * (by_rows ? u->tm : u->tn);
  int64_t hi = min64(lo + (by_rows ? u->tm : u->tn), by_rows ? u->m : u->n);
  const float *a = u->a, *b = u->b;
  float *c = u->c;
  int64_t m = u->m, n = u->n;
  if (by_rows) {
    a += u->ta ? lo : lo * u->k;
    c += lo * u->n;
    m = hi - lo;
  } else {
    b += u->tb ? lo * u->k : lo;
    c += lo;
    n = hi - lo;
  }
  int64_t lda = u->ta ? u->m : u->k, ldb = u->tb ? u->k : u->n;
  cblas_sgemm(CblasRowMajor, u->ta ? CblasTrans : CblasNoTrans, u->tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)u->k, 1.0f, a, (int)lda, b, (int)ldb, u->beta, c, (int)u->n);
}

/* The product as calls of tm rows and tn columns; par: over threads. */
static void product(gemm_ctx *u, int par) {
  if (u->m == 0 || u->n == 0) return;
  int64_t tiles = u->tm < u->m ? (u->m + u->tm - 1) / u->tm : (u->n + u->tn - 1) / u->tn;
  if (par) bbb_parallel_each(tiles, tile, u);
  else for (int64_t t = 0; t < tiles; t++) tile(u, t, t + 1);
}

/* bbb_gemm_clock's state: this thread's products, timed while it runs. */
static _Thread_local int clock_on;
static _Thread_local double clock_sec;
static _Thread_local int64_t clock_calls;

double bbb_gemm_clock(int on, int64_t *calls) {
  double sec = clock_sec;
  if (calls) *calls = clock_calls;
  if (on == 1) clock_sec = 0.0, clock_calls = 0;
  if (on >= 0) clock_on = on;
  return sec;
}

/* c (m, n) = op(a) op(b) + beta c, all row-major contiguous. The product
** is cut into at most TILES tiles along the longer side of c, each at least
** MIN_TILE rows or columns (a multiple of 4): a cut that depends on the
** shape alone. Each tile is one single-thread call (OpenBLAS runs on one
** thread inside a parallel region, and bbb keeps its own count at one), so
** a product has the same bits on any number of threads, and the count may
** change from one op to the next (parallel.c follows the load). */
void bbb_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
              float beta, float *c) {
  gemm_ctx u = { ta, tb, m, n, k, m, n, a, b, beta, c };
  int64_t side = m >= n ? m : n, step = (side + TILES - 1) / TILES;
  if (step < MIN_TILE) step = MIN_TILE;
  step = (step + 3) / 4 * 4;
  if (m >= n) u.tm = step; else u.tn = step;
  if (!clock_on) {
    product(&u, 1);
    return;
  }
  double t0 = bbb_clock();
  product(&u, 1);
  clock_sec += bbb_clock() - t0, clock_calls++;
}

void bbb_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float beta, float *c) {
  gemm_ctx u = { ta, tb, m, n, k, m, n, a, b, beta, c };
  product(&u, 0);
}
