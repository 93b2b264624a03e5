/*
** rng.c: Philox4x32-10 counter-based generator (Salmon et al., SC'11, as in
** Random123) and the uniform and normal fills built on it.
**
** Stream layout: the key is the seed (low word, high word); block j of a draw
** is philox(ctr = {lo32(c), hi32(c), 0, 0}) with c = g->counter + j (mod 2^64),
** and fills elements 4j .. 4j+3. A draw of n elements uses ceil(n/4) blocks
** and advances the counter by that much, so a draw whose n is not a multiple
** of 4 discards the rest of its last block: draw(n1) then draw(n2) equals the
** first n1 + n2 elements of draw(n1 + n2) exactly when n1 % 4 == 0.
**
** Work is done in chunks of blocks, Philox first into structure-of-arrays
** words, then the conversion, so both loops vectorise. A chunk's output
** depends only on its index, so the OpenMP split never changes the numbers.
*/
#include <math.h>
#include <string.h>

#include "engine/parallel.h"
#include "engine/rng.h"
#include "engine/vmath.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

#define CHUNK 64              /* blocks per batch: 4 KB of words, stays in L1 */

void bbb_rng_init(bbb_rng *g, uint64_t seed) {
  g->seed = seed;
  g->counter = 0;
}

/* One round on four words held in scalars: the form GCC vectorises when the
** caller loops over independent blocks. */
#define PHILOX_ROUND(c0, c1, c2, c3, k0, k1) do {                     \
    uint64_t p0_ = (uint64_t)PHILOX_M0 * (c0);                         \
    uint64_t p1_ = (uint64_t)PHILOX_M1 * (c2);                         \
    uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ (c1) ^ (k0);                \
    uint32_t n2_ = (uint32_t)(p0_ >> 32) ^ (c3) ^ (k1);                \
    (c1) = (uint32_t)p1_;                                              \
    (c3) = (uint32_t)p0_;                                              \
    (c0) = n0_;                                                        \
    (c2) = n2_;                                                        \
  } while (0)

void bbb_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

#if defined(__AVX512F__)
#include <immintrin.h>

/* a * m for 16 lanes of 32 bits, as the high and low words of the 64-bit
** products: vpmuludq on the even lanes and on the odd ones shifted down,
** then each word put back in its lane. (Written out because the compiler
** widens to 64-bit lanes and uses the slow 64 x 64 multiply.) */
static inline void mulhilo16(__m512i a, __m512i m, __m512i *hi, __m512i *lo) {
  __m512i pe = _mm512_mul_epu32(a, m);
  __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
  *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

/* Blocks base .. base+CHUNK-1 into w[word][block], 16 at a time. */
static void philox_chunk(uint64_t base, uint64_t seed, uint32_t w[4][CHUNK]) {
  const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i k0[10], k1[10];
  uint32_t a = (uint32_t)seed, b = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++, a += PHILOX_W0, b += PHILOX_W1) {
    k0[r] = _mm512_set1_epi32((int)a);
    k1[r] = _mm512_set1_epi32((int)b);
  }
  const __m512i lo = _mm512_set1_epi32((int)(uint32_t)base), hi = _mm512_set1_epi32((int)(uint32_t)(base >> 32));
  for (int i = 0; i < CHUNK; i += 16) {
    __m512i idx = _mm512_add_epi32(lanes, _mm512_set1_epi32(i));
    __m512i c0 = _mm512_add_epi32(lo, idx);
    /* carry into the high word where the low word wrapped */
    __m512i c1 = _mm512_mask_add_epi32(hi, _mm512_cmplt_epu32_mask(c0, idx), hi, _mm512_set1_epi32(1));
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    for (int r = 0; r < 10; r++) {
      __m512i h0, l0, h1, l1;
      mulhilo16(c0, m0, &h0, &l0);
      mulhilo16(c2, m1, &h1, &l1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), k0[r]);
      c2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), k1[r]);
      c1 = l1;
      c3 = l0;
    }
    _mm512_storeu_si512(&w[0][i], c0);
    _mm512_storeu_si512(&w[1][i], c1);
    _mm512_storeu_si512(&w[2][i], c2);
    _mm512_storeu_si512(&w[3][i], c3);
  }
}
#else
/* Blocks base .. base+CHUNK-1 into w[word][block]. The round keys are the
** same for every block, so they are computed once. */
static void philox_chunk(uint64_t base, uint64_t seed, uint32_t w[4][CHUNK]) {
  uint32_t k0[10], k1[10];
  k0[0] = (uint32_t)seed;
  k1[0] = (uint32_t)(seed >> 32);
  for (int r = 1; r < 10; r++) {
    k0[r] = k0[r - 1] + PHILOX_W0;
    k1[r] = k1[r - 1] + PHILOX_W1;
  }
  uint32_t lo = (uint32_t)base, hi = (uint32_t)(base >> 32);
  for (uint32_t i = 0; i < CHUNK; i++) {
    uint32_t c0 = lo + i;
    uint32_t c1 = hi + (c0 < i);             /* carry into the high word */
    uint32_t c2 = 0, c3 = 0;
    for (int r = 0; r < 10; r++) PHILOX_ROUND(c0, c1, c2, c3, k0[r], k1[r]);
    w[0][i] = c0; w[1][i] = c1; w[2][i] = c2; w[3][i] = c3;
  }
}
#endif

/* sin and cos of 2 pi t for t in [0, 1). Reduce in turns, which is exact:
** t = q/4 + s with |s| <= 1/8, then rotate (sin, cos)(2 pi s) by q quarter
** turns. Cephes polynomials on [-pi/4, pi/4]; abs error about 1e-7. */
static inline void sincos2pi(float t, float *sn, float *cs) {
  const float magic = 12582912.0f;           /* 1.5 * 2^23: adding rounds to int */
  float m = 4.0f * t + magic;
  uint32_t q = bbb_f2u(m) - 0x4B400000u;     /* round(4t), 0..4 */
  float a = (t - 0.25f * (m - magic)) * 6.28318530717958648f;
  float z = a * a;
  float ps = -1.9515295891e-4f;
  ps = BBB_FMAF(ps, z, 8.3321608736e-3f);
  ps = BBB_FMAF(ps, z, -1.6666654611e-1f);
  float s = BBB_FMAF(ps * z, a, a);
  float pc = 2.443315711809948e-5f;
  pc = BBB_FMAF(pc, z, -1.388731625493765e-3f);
  pc = BBB_FMAF(pc, z, 4.166664568298827e-2f);
  float c = BBB_FMAF(pc * z, z, BBB_FMAF(z, -0.5f, 1.0f));
  float s1 = bbb_self(q & 1u, c, s), c1 = bbb_self(q & 1u, s, c);
  *sn = bbb_u2f(bbb_f2u(s1) ^ ((q & 2u) << 30));        /* quadrants 2, 3 */
  *cs = bbb_u2f(bbb_f2u(c1) ^ (((q + 1u) & 2u) << 30)); /* quadrants 1, 2 */
}

/* Box-Muller: two words to two normals. u1 = (a/2 + 1/2) 2^-31 lies in
** (0, 1], so log never sees 0, and keeps full resolution near 0 where log is
** steep (int to float is exact below 2^24); the largest |z| is
** sqrt(-2 log 2^-32) = 6.66. */
static inline void box_muller(uint32_t a, uint32_t b, float *z0, float *z1) {
  float u1 = BBB_FMAF((float)(int32_t)(a >> 1), 0x1p-31f, 0x1p-32f);
  float t = (float)(int32_t)(b >> 8) * 0x1p-24f;
  float r = sqrtf(-2.0f * bbb_logf_core(u1, 0.0f, 0.0f));
  float sn, cs;
  sincos2pi(t, &sn, &cs);
  *z0 = r * cs;
  *z1 = r * sn;
}

/* Each block's (w0, w1) and (w2, w3) give four normals. */
static void normal_chunk(uint32_t w[4][CHUNK], float *dst, float mean, float std) {
  for (int i = 0; i < CHUNK; i++) {
    float z0, z1, z2, z3;
    box_muller(w[0][i], w[1][i], &z0, &z1);
    box_muller(w[2][i], w[3][i], &z2, &z3);
    dst[4 * i + 0] = BBB_FMAF(std, z0, mean);
    dst[4 * i + 1] = BBB_FMAF(std, z1, mean);
    dst[4 * i + 2] = BBB_FMAF(std, z2, mean);
    dst[4 * i + 3] = BBB_FMAF(std, z3, mean);
  }
}

/* 24 random bits give every float of [0, 1) on a 2^-24 grid. Rounding in
** lo + (hi - lo) u can still land on hi; top is the float just below it. */
static void uniform_chunk(uint32_t w[4][CHUNK], float *dst, float lo, float span, float hi,
                          float top) {
  for (int i = 0; i < CHUNK; i++) {
    for (int k = 0; k < 4; k++) {
      float u = (float)(int32_t)(w[k][i] >> 8) * 0x1p-24f;
      float v = lo + span * u;
      dst[4 * i + k] = v < hi ? v : top;
    }
  }
}

enum { KIND_UNIFORM, KIND_NORMAL };

static void fill(bbb_rng *g, bbb_float *out, int64_t n, int kind, float a, float b) {
  if (n <= 0) return;
  int64_t nblocks = (n + 3) / 4, nchunks = (nblocks + CHUNK - 1) / CHUNK;
  uint64_t counter = g->counter, seed = g->seed;
  /* lo >= hi (an empty range) gives lo everywhere; hi - lo must be finite */
  float top = kind == KIND_NORMAL || !(a < b) ? a : fmaxf(nextafterf(b, -INFINITY), a);
  int nt = n >= BBB_GRAIN_RNG ? bbb_get_num_threads() : 1;
  #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t c = 0; c < nchunks; c++) {
    uint32_t w[4][CHUNK];
    float buf[4 * CHUNK];
    int64_t first = c * 4 * CHUNK;
    int64_t len = n - first < 4 * CHUNK ? n - first : 4 * CHUNK;
    float *dst = len == 4 * CHUNK ? out + first : buf;  /* partial: stage */
    philox_chunk(counter + (uint64_t)c * CHUNK, seed, w);
    if (kind == KIND_NORMAL) normal_chunk(w, dst, a, b);
    else uniform_chunk(w, dst, a, b - a, b, top);
    if (dst == buf) memcpy(out + first, buf, (size_t)len * sizeof *buf);
  }
  g->counter += (uint64_t)nblocks;
}

void bbb_rng_uniform(bbb_rng *g, bbb_float *out, int64_t n, bbb_float lo, bbb_float hi) {
  fill(g, out, n, KIND_UNIFORM, lo, hi);
}

void bbb_rng_normal(bbb_rng *g, bbb_float *out, int64_t n, bbb_float mean, bbb_float std) {
  fill(g, out, n, KIND_NORMAL, mean, std);
}
