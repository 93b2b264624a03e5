/*
** parallel.h: one way to split a loop over threads, and the thread count
** shared by OpenMP (elementwise passes) and OpenBLAS (GEMM).
*/
#ifndef BBB_PARALLEL_H
#define BBB_PARALLEL_H

#include <stdint.h>

#include "engine/runtime.h"

/* Grain sizes: the least work (in elements unless said otherwise) worth
** handing to a thread. Every parallel loop takes its grain from here. */
#define BBB_GRAIN_ELEM 16384      /* elementwise passes, optimizer updates */
#define BBB_GRAIN_FILL 32768      /* constant fills */
#define BBB_GRAIN_RNG 65536       /* random fills (Philox blocks are cheap) */
#define BBB_GRAIN_ROWS 8192       /* row-wise passes (softmax): elements per share */
#define BBB_GRAIN_REDUCE 16384    /* reductions along a dimension */
#define BBB_GRAIN_CHUNKS 4        /* loops over fixed chunks: chunks per share */

/* Fixed chunk lengths of deterministic sums: partial sums are formed per
** chunk and added in order, so results do not depend on the thread count.
** Changing these changes computed numbers in the last bits. */
#define BBB_SUM_CHUNK 16384       /* bbb_parallel_sum */
#define BBB_BAYES_CHUNK 16384     /* the fused Bayesian passes */

/* The interrupt flag the loops below watch lives in runtime.h. */

typedef void (*bbb_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* Calls fn on disjoint ranges covering [0, n), each at least grain long
** (but the last), on up to bbb_get_num_threads() threads. Serial when small.
** Each thread walks its share in slices and stops early on an interrupt
** (the caller then checks bbb_interrupted()). */
void bbb_parallel_for(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx);

/* The same split, but every range runs to its end whatever the interrupt
** flag says: for passes that must not stop half way (an optimizer step
** changes all of a parameter or none of it). */
void bbb_parallel_for_whole(int64_t n, int64_t grain, bbb_range_fn fn, void *ctx);

/* Calls fn(ctx, i, i + 1) for each i in [0, n), spread over the threads,
** always inside a parallel region when there are several threads: OpenBLAS
** then runs every GEMM fn makes on one thread, the same kernel as a
** one-thread run, so their numbers do not depend on the thread count (a
** GEMM split over threads differs in the last bits). */
void bbb_parallel_each(int64_t n, bbb_range_fn fn, void *ctx);

/* Sum of fn over the whole of [0, n), in double: fn sums one chunk of a
** fixed size and the chunks are added in order, so the result is the same
** for any thread count. */
typedef double (*bbb_chunk_sum_fn)(const void *ctx, int64_t lo, int64_t hi);
double bbb_parallel_sum(int64_t n, bbb_chunk_sum_fn fn, const void *ctx);

/* Threads allowed per online core: bbb_set_num_threads refuses more than
** bbb_max_threads() = this many per core (at most 1024). */
#define BBB_THREADS_PER_CORE 8
int bbb_max_threads(void);

/* Sets the thread count asked for; BBB_EARG outside 1..bbb_max_threads().
** bbb_get_num_threads() is the count in use now: the asked-for one, or fewer
** while other processes hold cores (unless BBB_FOLLOW_LOAD=0); no number
** computed depends on it. bbb_threads_asked() is the asked-for count. */
int bbb_set_num_threads(int64_t n);
int bbb_get_num_threads(void);
int bbb_threads_asked(void);

/* Monotonic wall-clock seconds (not CPU time: it does not add up every
** thread's work). */
double bbb_clock(void);

/* Before a GEMM: BBB_EMEM (naming op) when the address-space limit leaves
** no room for the workspace OpenBLAS would take (it would spin forever). */
int bbb_blas_room(const char *op);

#endif
