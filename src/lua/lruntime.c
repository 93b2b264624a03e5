/*
** lruntime.c: settings of the running library (src/core/parallel.c,
** allocation counters) and a wall clock.
*/
#include <stdlib.h>
#include <string.h>

#include "engine/gemm.h"
#include "lua/lbbb.h"
#include "engine/parallel.h"

/** set_num_threads(n)
** Threads for bbb's parallel passes and OpenBLAS alike. */
static int l_set_num_threads(lua_State *L) {
  lbbb_check(L, bbb_set_num_threads((int64_t)lbbb_check_integer(L, 1, "n")));
  return 0;
}

/** max_threads() -> integer
** The most threads set_num_threads accepts here (a multiple of the cores). */
static int l_max_threads(lua_State *L) {
  lua_pushinteger(L, bbb_max_threads());
  return 1;
}

/** get_num_threads() -> integer
** The thread count set by set_num_threads (or OpenMP's default). */
static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, bbb_threads_asked());
  return 1;
}

/** threads_in_use() -> integer
** The threads the next op runs on: get_num_threads(), or fewer while other
** processes keep cores busy (checked every 0.2 s from /proc/stat; the
** environment variable BBB_FOLLOW_LOAD=0 turns this off). Every op gives
** the same numbers on any thread count, so only the speed changes. */
static int l_threads_in_use(lua_State *L) {
  lua_pushinteger(L, bbb_get_num_threads());
  return 1;
}

/** gemm_kernel([kind]) -> string
** The code that forms matrix products: "openblas" (the default: the
** kernels OpenBLAS picks for this CPU, which round differently from one CPU
** to another), "haswell" (the roundings of OpenBLAS 0.3.21's Haswell
** kernel, on which the recorded results were made, on any CPU: bbb's own
** kernel, faster than OpenBLAS where op(a) is mostly zeros, about 0.6 of its
** speed where it is dense) or "reference" (the same roundings as plain
** loops). The environment variable BBB_GEMM sets it when bbb loads. Sets
** it when kind is given; returns the one before. */
static const char *const gemm_kinds[] = { "openblas", "haswell", "reference", NULL };

static int l_gemm_kernel(lua_State *L) {
  int k = lua_isnoneornil(L, 1) ? -1 : lbbb_check_option(L, 1, "kind", NULL, gemm_kinds);
  lua_pushstring(L, gemm_kinds[bbb_gemm_kind(k)]);
  return 1;
}

/** gemm_own_kernel() -> boolean
** Whether "haswell" runs on bbb's own kernel here (the CPU has AVX2 and
** FMA); elsewhere it runs on the plain loops, far slower. */
static int l_gemm_own_kernel(lua_State *L) {
  lua_pushboolean(L, bbb_gemm_own_kernel());
  return 1;
}

/** gemm_clock([on [, terms]]) -> seconds, calls, a_terms, terms
** The time spent in matrix products (matmul, linear, the fused step) on
** this thread, and their count, since the clock was started: true starts
** it from zero, false stops it, nothing reads it; returns what it held
** before. Started with terms = true it also counts the products' terms
** op(a)[i][l] op(b)[l][j] with op(a)'s factor nonzero (what a kernel
** skipping op(a)'s zeros forms) and with both factors nonzero (what any
** kernel forming each entry as a chain of multiply-adds must), by a pass
** over each product's inputs, outside the products' time but not outside
** the caller's; both are nil when not counted or a count ran out of
** memory. It is off until started. */
static int l_gemm_clock(lua_State *L) {
  int on = -1;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    on = lua_toboolean(L, 1);
    if (!lua_isnoneornil(L, 2)) {
      luaL_checktype(L, 2, LUA_TBOOLEAN);
      if (on && lua_toboolean(L, 2)) on = 2;
    }
  }
  int64_t calls, terms[2];
  lua_pushnumber(L, bbb_gemm_clock(on, &calls, terms));
  lua_pushinteger(L, (lua_Integer)calls);
  for (int i = 0; i < 2; i++) {
    if (terms[i] < 0) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)terms[i]);
  }
  return 4;
}

/** bytes_allocated() -> integer
** Bytes of tensor storage currently held. */
static int l_bytes_allocated(lua_State *L) {
  lua_pushinteger(L, bbb_bytes_allocated());
  return 1;
}

/** clock() -> seconds
** Monotonic wall-clock time: unlike os.clock's CPU time, it does not add up
** every thread's work. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, bbb_clock());
  return 1;
}

static const luaL_Reg funcs[] = {
  {"set_num_threads", l_set_num_threads}, {"get_num_threads", l_get_num_threads},
  {"threads_in_use", l_threads_in_use},
  {"max_threads", l_max_threads}, {"gemm_kernel", l_gemm_kernel},
  {"gemm_own_kernel", l_gemm_own_kernel}, {"gemm_clock", l_gemm_clock},
  {"bytes_allocated", l_bytes_allocated}, {"clock", l_clock},
  {"last_error", lbbb_last_error}, {NULL, NULL}
};

void lbbb_open_runtime(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
  lua_pushliteral(L, BBB_VERSION);   /* from CMakeLists.txt's project VERSION */
  lua_setfield(L, tb->module, "version");
  const char *env = getenv("BBB_GEMM");
  if (env && *env) {
    int k = 0;
    while (gemm_kinds[k] && strcmp(gemm_kinds[k], env) != 0) k++;
    if (!gemm_kinds[k])
      luaL_error(L, "bbb: BBB_GEMM is \"%s\"; it must be \"openblas\", \"haswell\" or "
                 "\"reference\"", env);
    bbb_gemm_kind(k);
  }
}
