/*
** parallel.h: one way to split a loop over threads, and the thread count
** shared by OpenMP (elementwise passes) and OpenBLAS (GEMM).
*/
#ifndef BBB_PARALLEL_H
#define BBB_PARALLEL_H

#include <stdint.h>

typedef void (*bbb_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* Calls fn on disjoint ranges covering [0, n), each at least grain long
** (but the last), on up to bbb_get_num_threads() threads. Serial when small. */
void bbb_parallel_for(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx);

/* Sum of fn over the whole of [0, n), in double: fn sums one chunk of a
** fixed size and the chunks are added in order, so the result is the same
** for any thread count. */
typedef double (*bbb_chunk_sum_fn)(const void *ctx, int64_t lo, int64_t hi);
double bbb_parallel_sum(int64_t n, bbb_chunk_sum_fn fn, const void *ctx);

/* Threads allowed per online core: bbb_set_num_threads refuses more than
** bbb_max_threads() = this many per core (at most 1024). */
#define BBB_THREADS_PER_CORE 8
int bbb_max_threads(void);

/* Sets the OpenMP and OpenBLAS thread count; BBB_EARG outside 1..bbb_max_threads(). */
int bbb_set_num_threads(int64_t n);
int bbb_get_num_threads(void);

#endif
