/*
** tensor.c: storage and tensor lifetime, shape helpers.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/tensor.h"
#include "engine/parallel.h"

static int64_t bytes_allocated;   /* only grows/shrinks under the Lua state's lock */

int64_t bbb_bytes_allocated(void) { return bytes_allocated; }

int bbb_shape_check(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  if (ndim < 0 || ndim > BBB_MAXDIM)
    return bbb_error(BBB_ESHAPE, "a tensor has 0 to %d dimensions, got %d", BBB_MAXDIM, ndim);
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return bbb_error(BBB_ESHAPE, "size %lld of dimension %d is negative",
                       (long long)shape[i], i + 1);
    if (shape[i] > 0 && n > ((int64_t)1 << 40) / shape[i])
      return bbb_error(BBB_ESHAPE, "tensor of more than 2^40 elements");
    n *= shape[i];
  }
  *numel = n;
  return BBB_OK;
}

/* Large storages get pages of their own. Through malloc, glibc raises its
** mmap threshold after the first large free and then serves such blocks from
** a heap it rarely trims: a loop of temporaries grew to gigabytes of RSS
** with megabytes live. A training step allocates the same sizes every time,
** so freed blocks wait in a small cache keyed by exact size instead of going
** back to the kernel (and faulting in again) at once. */
#define BIG_BYTES ((size_t)256 << 10)
#define CACHE_SLOTS 64
#define CACHE_MAX_BYTES ((size_t)256 << 20)

static struct { void *p; size_t bytes; } cache[CACHE_SLOTS];
static int ncached;
static size_t cached_bytes;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t storage_bytes(int64_t n) {
  size_t b = (size_t)(n > 0 ? n : 1) * sizeof(bbb_float);
  return b >= BIG_BYTES ? (b + 4095) & ~(size_t)4095 : (b + 63) & ~(size_t)63;
}

static void *big_alloc(size_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&cache_lock);
  for (int i = ncached - 1; i >= 0; i--)
    if (cache[i].bytes == bytes) {
      p = cache[i].p;
      cached_bytes -= bytes;
      cache[i] = cache[--ncached];
      break;
    }
  pthread_mutex_unlock(&cache_lock);
  if (p) return p;
  p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t bytes) {
  pthread_mutex_lock(&cache_lock);
  if (bytes <= CACHE_MAX_BYTES / 4) {
    /* make room by dropping the oldest entries */
    while (ncached > 0 && (ncached == CACHE_SLOTS || cached_bytes + bytes > CACHE_MAX_BYTES)) {
      munmap(cache[0].p, cache[0].bytes);
      cached_bytes -= cache[0].bytes;
      memmove(cache, cache + 1, (size_t)(--ncached) * sizeof cache[0]);
    }
    cache[ncached].p = p;
    cache[ncached++].bytes = bytes;
    cached_bytes += bytes;
    p = NULL;
  }
  pthread_mutex_unlock(&cache_lock);
  if (p) munmap(p, bytes);
}

/* Small storages (under BIG_BYTES, sizes in 64-byte steps) wait after their
** free in a list per size, so a loop of small steps (the bandit's updates of
** 64 rows, some hundred tensors each) reuses its blocks instead of calling
** the allocator for each, whose cost showed as a visible share of such an
** update under perf. The lists hold at
** most SMALL_CACHE_MAX_BYTES in all; a freed block beyond that goes back to
** malloc. Under AddressSanitizer nothing is kept, so a use after free is
** still caught. Storages are made and released with the Lua state's lock
** held, as bytes_allocated is. */
#define SMALL_BINS ((int)(BIG_BYTES / 64))
#define SMALL_CACHE_MAX_BYTES ((size_t)32 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define SMALL_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMALL_CACHE 0
#endif
#endif
#ifndef SMALL_CACHE
#define SMALL_CACHE 1
#endif

static void *small_free_list[SMALL_BINS + 1];   /* by bytes / 64; each block's first word links the next */
static size_t small_cached_bytes;

static void *small_alloc(size_t bytes) {
  void **head = &small_free_list[bytes / 64];
  if (SMALL_CACHE && *head) {
    void *p = *head;
    *head = *(void **)p;
    small_cached_bytes -= bytes;
    return p;
  }
  return aligned_alloc(64, bytes);
}

static void small_free(void *p, size_t bytes) {
  if (SMALL_CACHE && small_cached_bytes + bytes <= SMALL_CACHE_MAX_BYTES) {
    void **head = &small_free_list[bytes / 64];
    *(void **)p = *head;
    *head = p;
    small_cached_bytes += bytes;
    return;
  }
  free(p);
}

/* The fixed-size headers (bbb_storage, bbb_tensor) are kept the same way,
** up to HEADER_CACHE of each. */
#define HEADER_CACHE 4096
typedef struct { void *head; int n; } header_list;
static header_list storage_headers, tensor_headers;

static void *header_alloc(header_list *l, size_t bytes) {
  if (SMALL_CACHE && l->head) {
    void *p = l->head;
    l->head = *(void **)p;
    l->n--;
    return p;
  }
  return malloc(bytes);
}

static void header_free(header_list *l, void *p) {
  if (SMALL_CACHE && p && l->n < HEADER_CACHE) {
    *(void **)p = l->head;
    l->head = p;
    l->n++;
    return;
  }
  free(p);
}

static bbb_storage *storage_new(int64_t n) {
  bbb_storage *s = header_alloc(&storage_headers, sizeof *s);
  if (!s) return NULL;
  size_t bytes = storage_bytes(n);
  /* 64-byte alignment at least: whole AVX-512 vectors and cache lines. */
  s->data = bytes >= BIG_BYTES ? big_alloc(bytes) : small_alloc(bytes);
  if (!s->data) { header_free(&storage_headers, s); return NULL; }
  s->size = n;
  s->refcount = 1;
  s->version = 0;
  s->sq_known = 0;
  bytes_allocated += (int64_t)bytes;
  return s;
}

static void storage_release(bbb_storage *s) {
  if (s && --s->refcount == 0) {
    size_t bytes = storage_bytes(s->size);
    bytes_allocated -= (int64_t)bytes;
    if (bytes >= BIG_BYTES) big_free(s->data, bytes);
    else small_free(s->data, bytes);
    header_free(&storage_headers, s);
  }
}

static bbb_tensor *tensor_shell(int ndim, const int64_t *shape, int64_t numel) {
  bbb_tensor *t = header_alloc(&tensor_headers, sizeof *t);
  if (!t) { bbb_error(BBB_EMEM, "out of memory"); return NULL; }
  memset(t, 0, sizeof *t);
  t->refcount = 1;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->numel = numel;
  return t;
}

bbb_tensor *bbb_tensor_new(int ndim, const int64_t *shape) {
  int64_t n;
  if (bbb_shape_check(ndim, shape, &n)) return NULL;
  bbb_tensor *t = tensor_shell(ndim, shape, n);
  if (!t) return NULL;
  t->storage = storage_new(n);
  if (!t->storage) {
    header_free(&tensor_headers, t);
    bbb_error(BBB_EMEM, "out of memory allocating %lld floats", (long long)n);
    return NULL;
  }
  return t;
}

typedef struct { bbb_float *d; bbb_float v; } fill_ctx;

static void fill_range(void *c, int64_t lo, int64_t hi) {
  fill_ctx *u = c;
  bbb_float *d = u->d, v = u->v;
  #pragma omp simd
  for (int64_t i = lo; i < hi; i++) d[i] = v;
}

bbb_tensor *bbb_tensor_full(int ndim, const int64_t *shape, bbb_float v) {
  bbb_tensor *t = bbb_tensor_new(ndim, shape);
  if (t) {
    fill_ctx u = { bbb_data(t), v };
    bbb_parallel_for(t->numel, BBB_GRAIN_FILL, fill_range, &u);
  }
  return t;
}

bbb_tensor *bbb_tensor_zeros(int ndim, const int64_t *shape) {
  return bbb_tensor_full(ndim, shape, 0);
}

bbb_tensor *bbb_tensor_zeros_like(const bbb_tensor *t) {
  return bbb_tensor_zeros(t->ndim, t->shape);
}

bbb_tensor *bbb_tensor_clone(const bbb_tensor *t) {
  bbb_tensor *c = bbb_tensor_new(t->ndim, t->shape);
  if (c) memcpy(bbb_data(c), bbb_data(t), (size_t)t->numel * sizeof(bbb_float));
  return c;
}

bbb_tensor *bbb_tensor_view(bbb_tensor *t, int ndim, const int64_t *shape, int64_t offset) {
  int64_t n;
  if (bbb_shape_check(ndim, shape, &n)) return NULL;
  if (offset < 0 || t->offset + offset + n > t->storage->size) {
    bbb_error(BBB_ESHAPE, "view of %lld elements at offset %lld exceeds storage of %lld",
              (long long)n, (long long)offset, (long long)t->storage->size);
    return NULL;
  }
  bbb_tensor *v = tensor_shell(ndim, shape, n);
  if (!v) return NULL;
  v->storage = t->storage;
  v->storage->refcount++;
  v->offset = t->offset + offset;
  return v;
}

void bbb_tensor_retain(bbb_tensor *t) { if (t) t->refcount++; }

void bbb_tensor_release(bbb_tensor *t) {
  if (!t || --t->refcount > 0) return;
  if (t->ext) t->ext_free(t->ext);
  storage_release(t->storage);
  header_free(&tensor_headers, t);
}

int bbb_same_shape(const bbb_tensor *a, const bbb_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

char *bbb_shape_str(const bbb_tensor *t, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "(");
  for (int i = 0; i < t->ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, ")");
  return buf;
}

