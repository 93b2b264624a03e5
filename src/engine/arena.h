/*
** arena.h: many small allocations freed at once, for the file readers
** (CSV, R data) whose results hold many strings and nodes of one lifetime.
*/
#ifndef BBB_ARENA_H
#define BBB_ARENA_H

#include <stddef.h>

typedef struct bbb_arena {
  void **ptrs;
  size_t n, cap;
  size_t bytes, max_bytes;   /* bytes given out; 0 = no cap */
} bbb_arena;

/* A new empty arena that gives out at most max_bytes (0: no cap); NULL when
** out of memory. */
bbb_arena *bbb_arena_new(size_t max_bytes);
/* bytes of zeroed memory owned by a; NULL when out of memory or past the
** cap (a stream of tiny items must not expand into gigabytes of nodes). */
void *bbb_arena_alloc(bbb_arena *a, size_t bytes);
/* A NUL-terminated copy of the len bytes at s, owned by a. */
char *bbb_arena_strdup(bbb_arena *a, const char *s, size_t len);
/* Frees everything a gave out, and a itself (NULL is fine). */
void bbb_arena_free(bbb_arena *a);

#endif
