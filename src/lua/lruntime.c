/*
** lruntime.c: settings of the running library (src/core/parallel.c,
** allocation counters) and a wall clock.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <time.h>

#include "lbbb.h"
#include "parallel.h"

static int l_set_num_threads(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1 || n > 1024) return luaL_error(L, "set_num_threads: need 1..1024 threads, got %d", (int)n);
  bbb_set_num_threads((int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, bbb_get_num_threads());
  return 1;
}

static int l_bytes_allocated(lua_State *L) {
  lua_pushinteger(L, bbb_bytes_allocated());
  return 1;
}


double lbbb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* clock() -> monotonic seconds: wall time, unlike os.clock's CPU time,
** which adds up every thread's work. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, lbbb_now());
  return 1;
}

static const luaL_Reg funcs[] = {
  {"set_num_threads", l_set_num_threads}, {"get_num_threads", l_get_num_threads},
  {"bytes_allocated", l_bytes_allocated}, {"clock", l_clock}, {NULL, NULL}
};

void lbbb_open_runtime(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
