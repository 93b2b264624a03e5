/*
** arena.c: many small allocations freed at once (see arena.h).
*/
#include <stdlib.h>
#include <string.h>

#include "engine/arena.h"

bbb_arena *bbb_arena_new(size_t max_bytes) {
  bbb_arena *a = calloc(1, sizeof *a);
  if (a) a->max_bytes = max_bytes;
  return a;
}

void *bbb_arena_alloc(bbb_arena *a, size_t bytes) {
  if (a->max_bytes) {
    if (bytes > a->max_bytes - a->bytes) return NULL;
    a->bytes += bytes + sizeof(void *);
  }
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    void **p = realloc(a->ptrs, cap * sizeof *p);
    if (!p) return NULL;
    a->ptrs = p;
    a->cap = cap;
  }
  void *m = calloc(1, bytes ? bytes : 1);
  if (m) a->ptrs[a->n++] = m;
  return m;
}

char *bbb_arena_strdup(bbb_arena *a, const char *s, size_t len) {
  char *c = bbb_arena_alloc(a, len + 1);
  if (c) memcpy(c, s, len);
  return c;
}

void bbb_arena_free(bbb_arena *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n; i++) free(a->ptrs[i]);
  free(a->ptrs);
  free(a);
}
