/*
** gemm.c: bbb_gemm, the GEMM under matmul, linear and the fused step, and
** bbb_sgemm, one call of it (convolutions); the Haswell rounding.
**
** OpenBLAS picks its kernels by CPU, and two kernels round a product
** differently, so a run's last bits used to depend on the machine. The
** "haswell" kind forms every product with the roundings of OpenBLAS
** 0.3.21's Haswell sgemm (kernel/x86_64/sgemm_kernel_8x4_haswell_2.c, as
** driver/level3/level3.c calls it on one thread), on which the recorded
** runs were made: they replay bit for bit on any CPU. "openblas" (the
** default) calls OpenBLAS; "reference" is the Haswell rounding as plain
** loops, the kernel's check.
**
** That rounding, in row-major terms. OpenBLAS sees c^T = op(b)^T op(a)^T:
** its M is our n (columns), its N our m (rows).
** - c starts as 0 when beta = 0 (it zeroes c first), else beta c.
** - k is cut into blocks (cut()): 320 while 640 remain, then the rest, or
**   half of it rounded up to 8 when more than 320. For each block every
**   entry gets c = fma(acc, 1, c), acc a chain of fmas over the block's k in
**   ascending order from +0.
** - The columns are cut the same way into column blocks. Some entries use
**   two chains: the odd k below 8 floor(kb/8) of the block in one, the rest
**   in the other, and acc = odd + even ("split"). Which ones depends on the
**   place of the entry: the rows go in chunks, in the first column block
**   12 while 12 remain, then 4 while 4 remain, then the rest; in later
**   ones 12s, then one chunk each of 8, 4, 2, 1 as they fit. In a chunk of
**   4 the columns of the block below 8 floor(nb/8) are split; in a chunk of
**   12, when the block has 16 columns or more, the first six rows split
**   columns [0, 8) and one more group of 8 near the end, the last six rows
**   one group of 8 near the end (split_groups walks the kernel's loop).
** bbb_gemm cuts a product into tiles by shape alone (TILES), each one call,
** so these places are places in a tile. tests/c/test_gemm.c checks all of
** it against OpenBLAS itself under OPENBLAS_CORETYPE=Haswell. Calls of more
** than MAX_ROWS rows, past what was checked, go to OpenBLAS in every kind.
**
** A zero in op(a) adds fma(0, b, acc) = acc exactly when b is finite (acc
** is never -0: it starts at +0 and x + -x rounds to +0), so the kernel may
** skip them; when op(b) holds an infinity or a NaN it skips none.
**
** The kernel (AVX2 and FMA). op(b) is copied once into a zero-padded buffer
** pb (transposed through registers when tb); the layouts of a shape (which
** 8-column groups of a row are split) are kept per thread for the last few
** shapes. Then, by what op(a) holds:
** - mostly zeros (one-hot inputs, ReLU activations and their gradients: the
**   bandit's products are about 80% zeros): rows one or two at a time, each
**   over the list of its own nonzero k, up to 6 groups of 8 columns in
**   registers per row; two chains run in one loop (two rows' single groups,
**   or one row's even and odd k), rows with lists of like length paired.
**   Each fma loads its own row of pb (and pb overflows L1 at the bandit's
**   sizes), so a row's entry costs about 17 cycles for 13 groups: it beats
**   a dense product only by the zeros it skips.
** - mostly nonzero: rows that share their places up to 6 at a time, 2
**   groups at a time (12 AVX accumulators) over every k; about 0.6 of
**   OpenBLAS's speed.
** - fewer than 8 columns (no entry split): 8 rows at a time in the lanes;
**   one row (no entry split either); one k with beta 0 (every entry is
**   fma(x, y, +0) + 0): an outer product.
** On a greedy agent's products late in training (15-25% nonzero) it takes
** about 0.85 of OpenBLAS's time here; on BBB's, whose gradients are about
** half nonzero, 1.5-1.9x (doc/bandit.md sections 14 and 15).
*/
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

#define TILES 4        /* bbb_gemm's cut (see there) */
#define MIN_TILE 32
#define HASWELL_P 320  /* OpenBLAS 0.3.21, Haswell: SGEMM_DEFAULT_P (columns per block) */
#define HASWELL_Q 320  /* SGEMM_DEFAULT_Q (k per block) */
#define MAX_ROWS 8192  /* rows of one call the rounding is known for (below sgemm_r) */

static int kind = BBB_GEMM_OPENBLAS;

int bbb_gemm_kind(int k) {
  int old = kind;
  if (k >= 0 && k < BBB_GEMM_KINDS) kind = k;
  return old;
}

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* The next block of a dimension with rest left: OpenBLAS's cut. */
static int64_t cut(int64_t rest, int64_t p) {
  return rest >= 2 * p ? p : rest > p ? (rest / 2 + 7) / 8 * 8 : rest;
}

/* The kind of row r of a call with rows rows: 0 and 1 the first and last
** six rows of a chunk of 12, 2 a chunk of 4, 3 any other. later: in a
** column block after the first. */
static int row_kind(int64_t rows, int64_t r, int later) {
  int64_t q = rows / 12 * 12, rest = rows - q, base = q;
  if (r < q) return r % 12 >= 6;
  if (!later) return r < base + rest / 4 * 4 ? 2 : 3;
  for (int64_t size = 8; size >= 1; size /= 2)
    if (rest >= size) {
      if (r < base + size) return size == 4 ? 2 : 3;
      base += size, rest -= size;
    }
  return 3;
}

/* Sets g[i] for the split 8-column groups of a block nb columns wide, in
** a row of the given kind. */
static void split_groups(int64_t nb, int kind_of_row, unsigned char *g) {
  memset(g, 0, (size_t)(nb + 7) / 8);
  if (kind_of_row <= 1 && nb >= 16) {
    int left = kind_of_row == 0;
    int64_t rest = nb, p = 0;   /* the kernel's m counter and c pointer */
    if (left) g[0] = 1;         /* its first m8n6 block, on the left half */
    for (;;) {                  /* m16n6 blocks, alternately right and left */
      rest -= 8, p += 8;
      if (rest < 16) { if (left) g[p / 8] = 1; return; }
      rest -= 8, p += 8;
      if (rest < 16) { if (!left) g[p / 8] = 1; return; }
    }
  }
  if (kind_of_row == 2) memset(g, 1, (size_t)(nb / 8));
}

static float start_of(float beta, float c) {
  return beta == 0.0f ? 0.0f : beta == 1.0f ? c : beta * c;
}

/* One call, c (m, n) = op(a) op(b) + beta c with strides, as plain loops. */
static void ref_call(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  unsigned char g[HASWELL_P / 8 + 1];
  for (int64_t r = 0; r < m; r++)
    for (int64_t col = 0; col < n; col++) c[r * ldc + col] = start_of(beta, c[r * ldc + col]);
  for (int64_t l0 = 0, kb; l0 < k; l0 += kb) {
    kb = cut(k - l0, HASWELL_Q);
    int64_t main_k = kb / 8 * 8;
    for (int64_t i0 = 0, nb; i0 < n; i0 += nb) {
      nb = cut(n - i0, HASWELL_P);
      for (int64_t r = 0; r < m; r++) {
        split_groups(nb, row_kind(m, r, i0 > 0), g);
        for (int64_t i = 0; i < nb; i++) {
          int64_t col = i0 + i;
          float even = 0.0f, odd = 0.0f;
          for (int64_t q = 0; q < kb; q++) {
            int64_t l = l0 + q;
            float x = ta ? a[l * lda + r] : a[r * lda + l], y = tb ? b[col * ldb + l] : b[l * ldb + col];
            if (g[i / 8] && q < main_k && (q & 1)) odd = fmaf(x, y, odd);
            else even = fmaf(x, y, even);
          }
          float *cp = c + r * ldc + col;
          *cp = fmaf(g[i / 8] ? odd + even : even, 1.0f, *cp);
        }
      }
    }
  }
}

/* A product cut into calls: tiles of tm rows and tn columns. */
typedef struct {
  int ta, tb;
  int64_t m, n, k, tm, tn;
  const float *a, *b;
  float beta;
  float *c;
  /* the kernel's state */
  const float *pb, *pa;   /* op(b) (k, np), op(a) (m, k) when ta */
  int64_t np, maxg;
  int keep_zeros;         /* op(b) holds a non-finite entry: skip no zeros of op(a) */
  int dense_a;            /* op(a) is mostly nonzero: no lists, every entry */
  const struct layout *lay;     /* 16, by row_key */
  const unsigned char *keys;    /* row_key of each row */
} gemm_ctx;

/* The 8-column groups of a row of c, single (0) and split (1), for one key
** of row (the row's kinds in the first and the later column blocks). */
typedef struct layout { int ng[2]; int64_t *off[2]; int *len[2]; } layout;

static int row_key(const gemm_ctx *u, int64_t r) {
  int64_t r0 = r / u->tm * u->tm, rows = min64(u->m - r0, u->tm);
  return 4 * row_kind(rows, r - r0, 0) + row_kind(rows, r - r0, 1);
}

static void make_layout(const gemm_ctx *u, int key, layout *L) {
  unsigned char g[HASWELL_P / 8 + 1];
  L->ng[0] = L->ng[1] = 0;
  for (int64_t c0 = 0; c0 < u->n; c0 += u->tn) {
    int64_t cols = min64(u->n - c0, u->tn);
    for (int64_t i0 = 0, nb; i0 < cols; i0 += nb) {
      nb = cut(cols - i0, HASWELL_P);
      split_groups(nb, i0 > 0 ? key % 4 : key / 4, g);
      for (int64_t p = 0; p < nb; p += 8) {
        int s = g[p / 8];
        L->off[s][L->ng[s]] = c0 + i0 + p, L->len[s][L->ng[s]++] = (int)min64(nb - p, 8);
      }
    }
  }
}

#if defined(__x86_64__)
#define OWN_KERNEL 1
#define AVX __attribute__((target("avx2,fma")))

/* The kernel's buffers, kept by the calling thread between calls. */
static _Thread_local char *buf;
static _Thread_local size_t buf_cap;

/* acc[r][g] (as given) gains a chain of fmas for R rows of c at once and G
** groups of 8 columns (at the groups' offsets off), each row of pb loaded
** once for the R rows: over k = q0, q0 + step, ... (cnt of them), taking
** row k of pb (np apart) and x[r][k]. R and G are constants at each call;
** the accumulators are named variables, as arrays of them end up in memory. */
#define MAX_R 6
#define MAX_G 2
static inline __attribute__((always_inline)) AVX void chain(int R, int G, const float *pb,
    const float *const *x, int64_t np, int64_t q0, int64_t step, int64_t cnt, const int64_t *off,
    __m256 acc[MAX_R][MAX_G]) {
  __m256 s00 = acc[0][0], s01 = acc[0][1], s10 = acc[1][0], s11 = acc[1][1];
  __m256 s20 = acc[2][0], s21 = acc[2][1], s30 = acc[3][0], s31 = acc[3][1];
  __m256 s40 = acc[4][0], s41 = acc[4][1], s50 = acc[5][0], s51 = acc[5][1];
  const float *x0 = x[0], *x1 = R > 1 ? x[1] : x0, *x2 = R > 2 ? x[2] : x0;
  const float *x3 = R > 3 ? x[3] : x0, *x4 = R > 4 ? x[4] : x0, *x5 = R > 5 ? x[5] : x0;
  for (int64_t t = 0, q = q0; t < cnt; t++, q += step) {
    const float *row = pb + q * np;
    int64_t i = q;
    __m256 b0 = _mm256_loadu_ps(row + off[0]);
    __m256 b1 = G > 1 ? _mm256_loadu_ps(row + off[1]) : b0;
#define ROW(r)                                                 \
    if (R > r) {                                               \
      __m256 xb = _mm256_broadcast_ss(x##r + i);               \
      s##r##0 = _mm256_fmadd_ps(xb, b0, s##r##0);              \
      if (G > 1) s##r##1 = _mm256_fmadd_ps(xb, b1, s##r##1);   \
    }
    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
  }
  acc[0][0] = s00, acc[0][1] = s01, acc[1][0] = s10, acc[1][1] = s11;
  acc[2][0] = s20, acc[2][1] = s21, acc[3][0] = s30, acc[3][1] = s31;
  acc[4][0] = s40, acc[4][1] = s41, acc[5][0] = s50, acc[5][1] = s51;
}

#define CHAIN_G(R) switch (G) {                                                         \
  case 1: chain(R, 1, pb, x, np, q0, step, cnt, off, acc); break;                       \
  default: chain(R, 2, pb, x, np, q0, step, cnt, off, acc); break; }

static AVX void chains(int R, int G, const float *pb, const float *const *x, int64_t np, int64_t q0,
                       int64_t step, int64_t cnt, const int64_t *off, __m256 acc[MAX_R][MAX_G]) {
  switch (R) {
  case 1: CHAIN_G(1) break;
  case 2: CHAIN_G(2) break;
  case 3: CHAIN_G(3) break;
  case 4: CHAIN_G(4) break;
  case 5: CHAIN_G(5) break;
  default: CHAIN_G(6) break;
  }
}
#undef CHAIN_G

/* c[0, len) = fma(acc, 1, start), start 0, c or beta c. */
static inline __attribute__((always_inline)) AVX void store8(__m256 acc, float *p, int len, float beta) {
  const __m256 one = _mm256_set1_ps(1.0f);
  if (len == 8) {
    __m256 c0 = beta == 0.0f ? _mm256_setzero_ps() : beta == 1.0f ? _mm256_loadu_ps(p)
              : _mm256_mul_ps(_mm256_loadu_ps(p), _mm256_set1_ps(beta));
    _mm256_storeu_ps(p, _mm256_fmadd_ps(acc, one, c0));
    return;
  }
  __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 c0 = _mm256_setzero_ps();
  if (beta != 0.0f) {
    c0 = _mm256_maskload_ps(p, mask);
    if (beta != 1.0f) c0 = _mm256_mul_ps(c0, _mm256_set1_ps(beta));
  }
  _mm256_maskstore_ps(p, mask, _mm256_fmadd_ps(acc, one, c0));
}

/* The same for G groups at offsets off. */
static AVX void store(int G, const __m256 *acc, const int64_t *off, const int *len, float beta,
                      float *c) {
  for (int i = 0; i < G; i++) store8(acc[i], c + off[i], len[i], beta);
}

/* The dense path: up to MAX_R rows of c from r0 that share a layout, each
** of them whole, over every k. */
static AVX void own_block(const gemm_ctx *u, int64_t r0, int R, const layout *L) {
  int64_t k = u->k, np = u->np;
  const float *x[MAX_R];   /* the rows of op(a) */
  __m256 acc[MAX_R][MAX_G], odd[MAX_R][MAX_G];
  for (int64_t l0 = 0, kb; l0 < k; l0 += kb) {
    kb = cut(k - l0, HASWELL_Q);
    float beta = l0 == 0 ? u->beta : 1.0f;
    const float *pb = u->pb + l0 * np;
    int64_t main_k = kb / 8 * 8;
    for (int r = 0; r < R; r++) x[r] = (u->ta ? u->pa : u->a) + (r0 + r) * k + l0;
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < L->ng[s]; i += MAX_G) {
        int G = (int)min64(L->ng[s] - i, MAX_G);
        const int64_t *off = L->off[s] + i;
        memset(acc, 0, sizeof acc);
        if (s == 0) chains(R, G, pb, x, np, 0, 1, kb, off, acc);
        else {
          memset(odd, 0, sizeof odd);
          chains(R, G, pb, x, np, 0, 2, main_k / 2, off, acc);
          chains(R, G, pb, x, np, main_k, 1, kb - main_k, off, acc);
          chains(R, G, pb, x, np, 1, 2, main_k / 2, off, odd);
          for (int r = 0; r < R; r++)
            for (int q = 0; q < G; q++) acc[r][q] = _mm256_add_ps(odd[r][q], acc[r][q]);
        }
        for (int r = 0; r < R; r++) store(G, acc[r], off, L->len[s] + i, beta, u->c + (r0 + r) * u->n);
      }
  }
}

/* The sparse path: rows of c one or two at a time, over the lists of their
** own nonzero k. batch() forms G groups of 8 columns (group g at offset
** off[g] of a row, len[g] wide) by two chains, A and B, each entry t of a
** chain taking k = at[t]: row k of pb (np floats apart) times x[k]; one
** loop runs both while both have entries, so that 2 G independent chains
** are in flight (one chain alone waits on the fma's latency). split: A and
** B are one row's even and odd k, stored as B + A into c0; else they are
** two rows' (B's into c1 when given). */
#define MAX_P 6
typedef struct { const int32_t *at; const float *x; int64_t cnt; } list;   /* k, x[k] */

static inline __attribute__((always_inline)) AVX void batch(int G, int split, const float *pb,
    int64_t np, const int64_t *off, const int *len, list A, list B, float beta, float *c0, float *c1) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const float *p0 = pb + off[0], *p1 = G > 1 ? pb + off[1] : p0, *p2 = G > 2 ? pb + off[2] : p0;
  const float *p3 = G > 3 ? pb + off[3] : p0, *p4 = G > 4 ? pb + off[4] : p0;
  const float *p5 = G > 5 ? pb + off[5] : p0;
  int64_t both = A.cnt < B.cnt ? A.cnt : B.cnt, t = 0;
#define GROUP(s, g, o, xb) if (G > g) s##g = _mm256_fmadd_ps(xb, _mm256_loadu_ps(p##g + o), s##g);
#define GROUPS(s, o, xb) GROUP(s, 0, o, xb) GROUP(s, 1, o, xb) GROUP(s, 2, o, xb) \
                         GROUP(s, 3, o, xb) GROUP(s, 4, o, xb) GROUP(s, 5, o, xb)
  for (; t < both; t++) {
    int64_t ka = A.at[t], kb = B.at[t], oa = ka * np, ob = kb * np;
    __m256 xa = _mm256_broadcast_ss(A.x + ka), xb = _mm256_broadcast_ss(B.x + kb);
    GROUPS(a, oa, xa) GROUPS(b, ob, xb)
  }
  for (int64_t q = t; q < A.cnt; q++) {
    int64_t ka = A.at[q], oa = ka * np;
    __m256 xa = _mm256_broadcast_ss(A.x + ka);
    GROUPS(a, oa, xa)
  }
  for (int64_t q = t; q < B.cnt; q++) {
    int64_t kb = B.at[q], ob = kb * np;
    __m256 xb = _mm256_broadcast_ss(B.x + kb);
    GROUPS(b, ob, xb)
  }
#undef GROUPS
#undef GROUP
#define OUT(g)                                                                            \
  if (G > g) {                                                                            \
    if (split) store8(_mm256_add_ps(b##g, a##g), c0 + off[g], len[g], beta);   /* odd + even */ \
    else {                                                                                \
      store8(a##g, c0 + off[g], len[g], beta);                                            \
      if (c1) store8(b##g, c1 + off[g], len[g], beta);                                    \
    }                                                                                     \
  }
  OUT(0) OUT(1) OUT(2) OUT(3) OUT(4) OUT(5)
#undef OUT
}

static AVX void batches(int G, int split, const float *pb, int64_t np, const int64_t *off,
                        const int *len, list A, list B, float beta, float *c0, float *c1) {
#define CASE(g) case g: { if (split) batch(g, 1, pb, np, off, len, A, B, beta, c0, c1); \
                          else batch(g, 0, pb, np, off, len, A, B, beta, c0, c1); } break;
  switch (G) {
  CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
  default:
  CASE(6)
  }
#undef CASE
}

/* Lists the k of one row x[0..kb) the chains take (nonzero, or all when
** keep_zeros): all of them in list 0 when single, and when split the even
** ones below 8 floor(kb/8) and all from there on in list 1, the odd ones
** below it in list 2. The row's nonzeros become bits, 64 at a time, and
** the bits entries. */
static void list_bits(uint64_t bits, int64_t base, int32_t *at, int64_t *cnt) {
  int64_t c = *cnt;
  for (; bits; bits &= bits - 1) at[c++] = (int32_t)(base + __builtin_ctzll(bits));
  *cnt = c;
}

static AVX void list_row(const float *x, int64_t kb, int keep_zeros, int single, int split,
                         int32_t *at[3], int64_t cnt[3]) {
  int64_t main_k = kb / 8 * 8;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 zero = _mm256_setzero_ps();
  cnt[0] = cnt[1] = cnt[2] = 0;
  for (int64_t base = 0; base < kb; base += 64) {
    uint64_t bits = 0;
    int64_t end = min64(kb, base + 64);
    for (int64_t i = base; i < end; i += 8) {
      int valid = end - i >= 8 ? 0xff : (1 << (end - i)) - 1, nz = valid;
      if (!keep_zeros) {
        __m256 xv = end - i >= 8 ? _mm256_loadu_ps(x + i)
          : _mm256_maskload_ps(x + i, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(end - i)), lanes));
        nz &= _mm256_movemask_ps(_mm256_cmp_ps(xv, zero, _CMP_NEQ_UQ));
      }
      bits |= (uint64_t)nz << (i - base);
    }
    if (single) list_bits(bits, base, at[0], &cnt[0]);
    if (split) {   /* odd k below main_k: bits at odd places (base is even) */
      uint64_t below = main_k - base >= 64 ? ~0ull : main_k <= base ? 0 : (1ull << (main_k - base)) - 1;
      uint64_t odd = bits & below & 0xaaaaaaaaaaaaaaaaull;
      list_bits(bits & ~odd, base, at[1], &cnt[1]);
      list_bits(odd, base, at[2], &cnt[2]);
    }
  }
}

/* Rows lo .. hi - 1 of c (at most 12), whole, by the sparse path. For each
** block of k the rows' lists are made first; then rows of one layout go
** two at a time, those with lists of like length together (a chain that
** runs on alone waits on the fma's latency): their single groups as
** chains A and B, the split groups of each row with its even k as A and
** its odd k as B. Which rows go together changes no bit. */
static AVX void own_chunk_sparse(const gemm_ctx *u, int64_t lo, int64_t hi) {
  int64_t k = u->k, vs = min64(k, HASWELL_Q) + 8, cnt[12][3];
  int nr = (int)(hi - lo), order[12];
  int32_t ibuf[12][3 * vs];
  int32_t *at[12][3];
  const float *x[12];
  for (int r = 0; r < nr; r++)
    for (int l = 0; l < 3; l++) at[r][l] = ibuf[r] + l * vs;
  for (int64_t l0 = 0, kb; l0 < k; l0 += kb) {
    kb = cut(k - l0, HASWELL_Q);
    float beta = l0 == 0 ? u->beta : 1.0f;
    const float *pb = u->pb + l0 * u->np;
    int64_t len_of[12];
    for (int r = 0; r < nr; r++) {
      const layout *L = u->lay + u->keys[lo + r];
      x[r] = (u->ta ? u->pa : u->a) + (lo + r) * k + l0;
      list_row(x[r], kb, u->keep_zeros, L->ng[0] > 0, L->ng[1] > 0, at[r], cnt[r]);
      len_of[r] = L->ng[0] ? cnt[r][0] : cnt[r][1];
      int q = r;   /* insertion by (layout, length) */
      for (; q > 0; q--) {
        int p = order[q - 1], kp = u->keys[lo + p], kr = u->keys[lo + r];
        if (kp < kr || (kp == kr && len_of[p] <= len_of[r])) break;
        order[q] = p;
      }
      order[q] = r;
    }
    for (int i = 0; i < nr;) {
      int ra = order[i], R = i + 1 < nr && u->keys[lo + order[i + 1]] == u->keys[lo + ra] ? 2 : 1;
      int rb = R > 1 ? order[i + 1] : ra, rows[2] = { ra, rb };
      i += R;
      const layout *L = u->lay + u->keys[lo + ra];
      float *c0 = u->c + (lo + ra) * u->n, *c1 = R > 1 ? u->c + (lo + rb) * u->n : NULL;
      for (int s = 0; s < 2; s++) {
        int ng = L->ng[s], nbat = (ng + MAX_P - 1) / MAX_P;
        for (int b = 0, g0 = 0; b < nbat; b++) {
          int G = ng / nbat + (b < ng % nbat);
          const int64_t *off = L->off[s] + g0;
          const int *len = L->len[s] + g0;
          if (s == 0) {
            list A = { at[ra][0], x[ra], cnt[ra][0] }, B = { at[rb][0], x[rb], R > 1 ? cnt[rb][0] : 0 };
            batches(G, 0, pb, u->np, off, len, A, B, beta, c0, c1);
          } else
            for (int q = 0; q < R; q++) {
              int r = rows[q];
              list A = { at[r][1], x[r], cnt[r][1] }, B = { at[r][2], x[r], cnt[r][2] };
              batches(G, 1, pb, u->np, off, len, A, B, beta, q ? c1 : c0, NULL);
            }
          g0 += G;
        }
      }
    }
  }
}

/* Rows [12 lo, 12 hi) of c (12: a chunk of rows, two runs of 6 with one
** layout each): by the sparse path a chunk at a time, else MAX_R rows at a
** time. */
static void own_rows(void *p, int64_t lo, int64_t hi) {
  const gemm_ctx *u = p;
  lo *= 12, hi = min64(hi * 12, u->m);
  if (!u->dense_a) {
    for (int64_t r = lo; r < hi; r += 12) own_chunk_sparse(u, r, min64(r + 12, hi));
    return;
  }
  for (int64_t r = lo; r < hi;) {
    int key = u->keys[r], R = 1;
    while (R < MAX_R && r + R < hi && u->keys[r + R] == key) R++;
    own_block(u, r, R, u->lay + key);
    r += R;
  }
}

/* r[q][i] becomes r[i][q], for an 8 x 8 block in registers. */
static inline __attribute__((always_inline)) AVX void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  }
  for (int q = 0; q < 8; q += 4) {
    r[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
    r[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xee);
    r[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    r[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xee);
  }
  for (int q = 0; q < 4; q++) {
    __m256 lo = _mm256_permute2f128_ps(r[q], r[q + 4], 0x20);
    __m256 hi = _mm256_permute2f128_ps(r[q], r[q + 4], 0x31);
    t[q] = lo, t[q + 4] = hi;
  }
  for (int q = 0; q < 8; q++) r[q] = t[q];
}

/* dst[j][i] = src[i][j] for i < rows, j < cols (row strides lds, ldd), in
** blocks of 8 x 8 through registers, the edges masked. */
static AVX void transpose(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst,
                          int64_t ldd) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i0 = 0; i0 < rows; i0 += 8) {
    int ni = (int)min64(rows - i0, 8);
    __m256i smask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ni), lanes);
    for (int64_t j0 = 0; j0 < cols; j0 += 8) {
      int nj = (int)min64(cols - j0, 8);
      __m256i lmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nj), lanes);
      __m256 t[8];
      for (int q = 0; q < 8; q++)
        t[q] = q >= ni ? _mm256_setzero_ps() : nj == 8 ? _mm256_loadu_ps(src + (i0 + q) * lds + j0)
                                              : _mm256_maskload_ps(src + (i0 + q) * lds + j0, lmask);
      transpose8(t);
      for (int q = 0; q < nj; q++) {   /* t[q]: column j0 + q */
        if (ni == 8) _mm256_storeu_ps(dst + (j0 + q) * ldd + i0, t[q]);
        else _mm256_maskstore_ps(dst + (j0 + q) * ldd + i0, smask, t[q]);
      }
    }
  }
}

/* Copies op(b) into pb (k rows np floats apart, zero-padded) and, when ta,
** op(a) into pa (m rows of k); returns whether op(b) is all finite. */
static AVX int pack(const gemm_ctx *u, float *pb, float *pa) {
  int64_t n = u->n, k = u->k, np = u->np;
  const __m256 z = _mm256_setzero_ps();
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t last = n / 8 * 8;   /* the group holding column n, and the one after it, get zeros past n */
  __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - last)), lanes);
  __m256 bad = z, bad2 = z;   /* x * 0 is NaN where x is not finite; two ors in flight */
  if (u->tb) {
    transpose(u->b, n, k, k, pb, np);   /* b is (n, k) */
    for (int64_t i = 0; i < k; i++) {
      float *row = pb + i * np;
      _mm256_storeu_ps(row + last, _mm256_and_ps(_mm256_loadu_ps(row + last), _mm256_castsi256_ps(keep)));
      if (last + 8 < np) _mm256_storeu_ps(row + last + 8, z);
      int64_t col = 0;
      for (; col + 16 <= np; col += 16) {
        bad = _mm256_or_ps(bad, _mm256_mul_ps(_mm256_loadu_ps(row + col), z));
        bad2 = _mm256_or_ps(bad2, _mm256_mul_ps(_mm256_loadu_ps(row + col + 8), z));
      }
      if (col < np) bad = _mm256_or_ps(bad, _mm256_mul_ps(_mm256_loadu_ps(row + col), z));
    }
  } else
    for (int64_t i = 0; i < k; i++) {   /* copied and checked in one pass */
      const float *src = u->b + i * n;
      float *row = pb + i * np;
      int64_t col = 0;
      for (; col + 16 <= last; col += 16) {
        __m256 x0 = _mm256_loadu_ps(src + col), x1 = _mm256_loadu_ps(src + col + 8);
        _mm256_storeu_ps(row + col, x0), _mm256_storeu_ps(row + col + 8, x1);
        bad = _mm256_or_ps(bad, _mm256_mul_ps(x0, z)), bad2 = _mm256_or_ps(bad2, _mm256_mul_ps(x1, z));
      }
      for (; col < last; col += 8) {
        __m256 x0 = _mm256_loadu_ps(src + col);
        _mm256_storeu_ps(row + col, x0);
        bad = _mm256_or_ps(bad, _mm256_mul_ps(x0, z));
      }
      __m256 x0 = _mm256_maskload_ps(src + last, keep);   /* zeros past n */
      _mm256_storeu_ps(row + last, x0);
      bad = _mm256_or_ps(bad, _mm256_mul_ps(x0, z));
      if (last + 8 < np) _mm256_storeu_ps(row + last + 8, z);
    }
  if (u->ta) transpose(u->a, k, u->m, u->m, pa, k);   /* a is (k, m) */
  /* an or of +-0s and NaNs has all its exponent bits set where a NaN was */
  __m256i e = _mm256_and_si256(_mm256_castps_si256(_mm256_or_ps(bad, bad2)), _mm256_set1_epi32(0x7f800000));
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7f800000)))) == 0;
}

/* How many of x[0..n) are nonzero. */
static AVX int64_t nonzeros(const float *x, int64_t n) {
  int64_t nz = 0, i = 0;
  const __m256 zero = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8)
    nz += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), zero, _CMP_NEQ_UQ)));
  for (; i < n; i++) nz += x[i] != 0.0f;
  return nz;
}

/* Products fewer than 8 columns wide: no entry is split (a split needs a
** block of 8 columns or more), so each is one chain over every k of a
** block. Here 8 rows go at a time, one vector per column of c, every k
** taken (no list, no pb). Blocks lo .. hi - 1 of 8 rows. */
static AVX void narrow_rows(void *p, int64_t lo, int64_t hi) {
  const gemm_ctx *u = p;
  int64_t m = u->m, n = u->n, k = u->k;
  const float *restrict b = u->b;
  int64_t sk = u->tb ? 1 : n, sj = u->tb ? k : 1;   /* op(b)[l][j] = b[l sk + j sj] */
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 one = _mm256_set1_ps(1.0f);
  float tmp[8];
  for (int64_t blk = lo; blk < hi; blk++) {
    int64_t r0 = blk * 8;
    int nr = (int)min64(m - r0, 8);
    __m256i rmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lanes);
    __m256 cv[8], acc[8], av[8];
    for (int64_t j = 0; j < n; j++) {
      for (int q = 0; q < 8; q++) tmp[q] = q < nr ? start_of(u->beta, u->c[(r0 + q) * n + j]) : 0.0f;
      cv[j] = _mm256_loadu_ps(tmp);
    }
    for (int64_t l0 = 0, kb; l0 < k; l0 += kb) {
      kb = cut(k - l0, HASWELL_Q);
      for (int64_t j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
      for (int64_t kk = l0; kk < l0 + kb; kk += 8) {
        int nq = (int)min64(l0 + kb - kk, 8);
        if (u->ta)   /* a is (k, m): op(a)'s column kk + q is a row of a */
          for (int q = 0; q < nq; q++) av[q] = _mm256_maskload_ps(u->a + (kk + q) * m + r0, rmask);
        else {
          __m256i kmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nq), lanes);
          for (int q = 0; q < 8; q++)
            av[q] = q < nr ? _mm256_maskload_ps(u->a + (r0 + q) * k + kk, kmask) : _mm256_setzero_ps();
          transpose8(av);
        }
        for (int q = 0; q < nq; q++) {
          const float *y = b + (kk + q) * sk;
          for (int64_t j = 0; j < n; j++) acc[j] = _mm256_fmadd_ps(av[q], _mm256_set1_ps(y[j * sj]), acc[j]);
        }
      }
      for (int64_t j = 0; j < n; j++) cv[j] = _mm256_fmadd_ps(acc[j], one, cv[j]);
    }
    for (int64_t j = 0; j < n; j++) {
      _mm256_storeu_ps(tmp, cv[j]);
      for (int q = 0; q < nr; q++) u->c[(r0 + q) * n + j] = tmp[q];
    }
  }
}

/* Products over one k: entry (r, j) is fma(x, y, +0) for x = op(a)[r][0],
** y = op(b)[0][j] (a[r] and b[j] for every transpose), plus +0 first where
** it is split (the odd chain, empty), then added to the start. Rows lo .. hi - 1. */
static AVX void k1_rows(void *p, int64_t lo, int64_t hi) {
  const gemm_ctx *u = p;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = lo; r < hi; r++) {
    const layout *L = u->lay + u->keys[r];
    __m256 x = _mm256_set1_ps(u->a[r]);
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < L->ng[s]; i++) {
        int64_t off = L->off[s][i];
        int len = L->len[s][i];
        __m256 y = len == 8 ? _mm256_loadu_ps(u->b + off)
                            : _mm256_maskload_ps(u->b + off, _mm256_cmpgt_epi32(_mm256_set1_epi32(len), lanes));
        __m256 e = _mm256_fmadd_ps(x, y, zero);
        store8(s ? _mm256_add_ps(zero, e) : e, u->c + r * u->n + off, len, u->beta);
      }
  }
}

/* Products over one k with beta 0: a split entry adds its empty odd chain
** (+0) first and every entry adds +0 last, and x + 0 + 0 = x + 0, so every
** entry is fma(x, y, +0) + 0 (-0 becomes +0), whatever its place. */
static AVX void outer_rows(void *p, int64_t lo, int64_t hi) {
  const gemm_ctx *u = p;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 zero = _mm256_setzero_ps();
  int64_t n = u->n, last = n / 8 * 8;
  __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - last)), lanes);
  for (int64_t r = lo; r < hi; r++) {
    __m256 x = _mm256_set1_ps(u->a[r]);
    float *c = u->c + r * n;
    for (int64_t j = 0; j < last; j += 8)
      _mm256_storeu_ps(c + j, _mm256_add_ps(_mm256_fmadd_ps(x, _mm256_loadu_ps(u->b + j), zero), zero));
    if (last < n)
      _mm256_maskstore_ps(c + last, tail,
                          _mm256_add_ps(_mm256_fmadd_ps(x, _mm256_maskload_ps(u->b + last, tail), zero), zero));
  }
}

/* One row of c, op(b) = b, within one block of columns: a call of one row
** has no split entry, so each is one chain over every k of a block; up to
** 12 groups of 8 columns at a time, b's rows read in place. */
static AVX void one_row(const gemm_ctx *u) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t n = u->n, k = u->k, groups = (n + 7) / 8;
  int last = (int)(n - (groups - 1) * 8);   /* the last group's width */
  __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(last), lanes);
  for (int64_t g0 = 0; g0 < groups; g0 += 12) {
    int G = (int)min64(groups - g0, 12);
    __m256 acc[12];
    for (int64_t l0 = 0, kb; l0 < k; l0 += kb) {
      kb = cut(k - l0, HASWELL_Q);
      for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_ps();
      for (int64_t l = l0; l < l0 + kb; l++) {
        __m256 x = _mm256_set1_ps(u->a[l]);   /* op(a) is a's one row or column */
        const float *row = u->b + l * n + g0 * 8;
        for (int g = 0; g < G; g++) {
          __m256 y = g0 + g == groups - 1 ? _mm256_maskload_ps(row + 8 * g, tail) : _mm256_loadu_ps(row + 8 * g);
          acc[g] = _mm256_fmadd_ps(x, y, acc[g]);
        }
      }
      for (int g = 0; g < G; g++)
        store8(acc[g], u->c + (g0 + g) * 8, g0 + g == groups - 1 ? last : 8, l0 == 0 ? u->beta : 1.0f);
    }
  }
}

/* The layouts and row keys of a shape (m, n cut into tm, tn), kept by the
** calling thread for the last few shapes it met: an update makes the same
** few products again and again. */
#define SHAPES 8
typedef struct {
  int64_t m, n, tm, tn;
  unsigned char *keys;   /* row_key of each row */
  layout lay[16];
  void *mem;
} shape;
static _Thread_local shape shapes[SHAPES];
static _Thread_local int shapes_next;

static const shape *shape_of(const gemm_ctx *u) {
  for (int i = 0; i < SHAPES; i++) {
    const shape *e = &shapes[i];
    if (e->mem && e->m == u->m && e->n == u->n && e->tm == u->tm && e->tn == u->tn) return e;
  }
  shape *e = &shapes[shapes_next];
  size_t ng = (size_t)u->maxg;
  void *mem = malloc((size_t)u->m + 16 * 2 * ng * (sizeof(int64_t) + sizeof(int)) + 8);
  if (!mem) return NULL;
  free(e->mem);
  shapes_next = (shapes_next + 1) % SHAPES;
  int64_t *offs = (int64_t *)mem;
  int *lens = (int *)(offs + 16 * 2 * ng);
  e->keys = (unsigned char *)(lens + 16 * 2 * ng);
  e->m = u->m, e->n = u->n, e->tm = u->tm, e->tn = u->tn, e->mem = mem;
  int used[16] = { 0 };
  for (int64_t r = 0; r < u->m; r++) used[e->keys[r] = (unsigned char)row_key(u, r)] = 1;
  for (int q = 0; q < 16; q++) {
    for (int s = 0; s < 2; s++)
      e->lay[q].off[s] = offs + (2 * q + s) * ng, e->lay[q].len[s] = lens + (2 * q + s) * ng;
    e->lay[q].ng[0] = e->lay[q].ng[1] = 0;
    if (used[q]) make_layout(u, q, e->lay + q);
  }
  return e;
}

/* The whole product by the kernel, rows spread over threads when par;
** 0 when memory runs out. */
static int own_gemm(gemm_ctx *u, int par) {
  if (u->n < 8) {
    if (par) bbb_parallel_each((u->m + 7) / 8, narrow_rows, u);
    else narrow_rows(u, 0, (u->m + 7) / 8);
    return 1;
  }
  if (u->k == 1 && u->beta == 0.0f) {   /* every entry is fma(x, y, +0) (+ +0 where split) + +0 */
    if (par) bbb_parallel_each(u->m, outer_rows, u);
    else outer_rows(u, 0, u->m);
    return 1;
  }
  if (u->m == 1 && !u->tb && u->n <= HASWELL_P) {
    one_row(u);
    return 1;
  }
  u->np = (u->n + 7) / 8 * 8 + 8;   /* a group may start off the 8-grid */
  u->maxg = u->n / 8 + 2 * ((u->n + u->tn - 1) / u->tn) * ((u->tn + HASWELL_P - 1) / HASWELL_P + 1);
  size_t fl = (size_t)(u->k * u->np + (u->ta ? u->m * u->k : 0));
  size_t need = fl * sizeof(float) + 64;
  if (need > buf_cap) {
    char *p = realloc(buf, need);
    if (!p) return 0;
    buf = p, buf_cap = need;
  }
  float *pb = (float *)buf, *pa = pb + u->k * u->np;
  const shape *e = shape_of(u);
  if (!e) return 0;
  u->pb = pb, u->pa = pa, u->lay = e->lay, u->keys = e->keys;
  if (u->k == 1) {
    if (par) bbb_parallel_each(u->m, k1_rows, u);
    else k1_rows(u, 0, u->m);
    return 1;
  }
  u->keep_zeros = !pack(u, pb, pa);
  int64_t all = u->m * u->k, seen = all < 1024 ? all : 1024;   /* a sample: the paths give the same bits */
  u->dense_a = 2 * nonzeros(u->a + (all - seen) / 2, seen) > seen;
  if (par) bbb_parallel_each((u->m + 11) / 12, own_rows, u);
  else own_rows(u, 0, (u->m + 11) / 12);
  return 1;
}

static int avx2_fma;

__attribute__((constructor)) static void find_avx2_fma(void) {
  __builtin_cpu_init();
  avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

int bbb_gemm_own_kernel(void) {
#if OWN_KERNEL
  return avx2_fma;
#else
  return 0;
#endif
}

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
  if (kind != BBB_GEMM_OPENBLAS && m <= MAX_ROWS)
    ref_call(u->ta, u->tb, m, n, u->k, a, lda, b, ldb, u->beta, c, u->n);
  else
    cblas_sgemm(CblasRowMajor, u->ta ? CblasTrans : CblasNoTrans, u->tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)u->k, 1.0f, a, (int)lda, b, (int)ldb, u->beta, c, (int)u->n);
}

/* The product as calls of tm rows and tn columns; par: over threads. */
static void product(gemm_ctx *u, int par) {
  int64_t tiles = u->tm < u->m ? (u->m + u->tm - 1) / u->tm : (u->n + u->tn - 1) / u->tn;
  if (u->m == 0 || u->n == 0) return;
#if OWN_KERNEL
  if (kind == BBB_GEMM_HASWELL && u->k > 0 && u->tm <= MAX_ROWS &&
      avx2_fma && own_gemm(u, par))
    return;
#endif
  if (par) bbb_parallel_each(tiles, tile, u);
  else for (int64_t t = 0; t < tiles; t++) tile(u, t, t + 1);
}

/* bbb_gemm_clock's state: this thread's products, timed while it runs. */
static _Thread_local int clock_on;
static _Thread_local double clock_sec;
static _Thread_local int64_t clock_calls, clock_terms[2] = { -1, -1 };   /* -1: not counted */

double bbb_gemm_clock(int on, int64_t *calls, int64_t terms[2]) {
  double sec = clock_sec;
  if (calls) *calls = clock_calls;
  if (terms) terms[0] = clock_terms[0], terms[1] = clock_terms[1];
  if (on >= 1) clock_sec = 0.0, clock_calls = 0, clock_terms[0] = clock_terms[1] = on == 2 ? 0 : -1;
  if (on >= 0) clock_on = on;
  return sec;
}

/* The product's terms op(a)[i][l] op(b)[l][j] with op(a)'s factor nonzero
** (t[0]) and with both nonzero (t[1]): over l, the nonzeros in column l of
** op(a) times n, and times the nonzeros in row l of op(b). Returns 0 when
** there is no memory for the counts. */
static int nonzero_terms(const gemm_ctx *u, int64_t t[2]) {
  int64_t m = u->m, n = u->n, k = u->k;
  int64_t *ca = calloc((size_t)(2 * k + 1), sizeof *ca), *cb = ca + k;
  if (!ca) return 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t l = 0; l < k; l++) ca[l] += (u->ta ? u->a[l * m + i] : u->a[i * k + l]) != 0.0f;
  for (int64_t j = 0; j < n; j++)
    for (int64_t l = 0; l < k; l++) cb[l] += (u->tb ? u->b[j * k + l] : u->b[l * n + j]) != 0.0f;
  t[0] = t[1] = 0;
  for (int64_t l = 0; l < k; l++) t[0] += ca[l] * n, t[1] += ca[l] * cb[l];
  free(ca);
  return 1;
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
  gemm_ctx u = { ta, tb, m, n, k, m, n, a, b, beta, c, NULL, NULL, 0, 0, 0, 0, NULL, NULL };
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
  int64_t t[2];
  if (clock_on == 2 && clock_terms[0] >= 0) {   /* counted after the clock stops */
    if (nonzero_terms(&u, t)) clock_terms[0] += t[0], clock_terms[1] += t[1];
    else clock_terms[0] = clock_terms[1] = -1;
  }
}

void bbb_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float beta, float *c) {
  gemm_ctx u = { ta, tb, m, n, k, m, n, a, b, beta, c, NULL, NULL, 0, 0, 0, 0, NULL, NULL };
  product(&u, 0);
}
