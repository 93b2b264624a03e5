/*
** lruntime.c: settings of the running library (src/engine/parallel.c,
** allocation counters) and a wall clock.
*/
#include <stdlib.h>
#include <string.h>

#include "engine/gemm.h"
#include "lua/lbbb.h"
#include "engine/parallel.h"

/** set_num_threads(n)
** Threads for bbb's parallel passes and OpenBLAS alike.
** @usage
**   bbb.set_num_threads(2)
**   assert(bbb.get_num_threads() == 2) */
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

/** gemm_clock([on]) -> seconds, calls
** The time spent in matrix products (matmul, linear, the fused step) on
** this thread, and their count, since the clock was started: true starts
** it from zero, false stops it, nothing reads it; returns what it held
** before. It is off until started. */
static int l_gemm_clock(lua_State *L) {
  int on = -1;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    on = lua_toboolean(L, 1);
  }
  int64_t calls;
  lua_pushnumber(L, bbb_gemm_clock(on, &calls));
  lua_pushinteger(L, (lua_Integer)calls);
  return 2;
}

char *openblas_get_corename(void);
char *openblas_get_config(void);

/** environment() -> {openblas =, core =, coretype =}
** What a run's last bits depend on besides bbb: OpenBLAS's build (its
** version and options), the kernels it picked for this CPU, and
** OPENBLAS_CORETYPE when set (nil otherwise). Results and checkpoints
** record it, so a replay knows what to pin. */
static int l_environment(lua_State *L) {
  const char *config = openblas_get_config(), *core = openblas_get_corename();
  const char *env = getenv("OPENBLAS_CORETYPE");
  lua_createtable(L, 0, 3);
  lua_pushstring(L, config ? config : "unknown");
  lua_setfield(L, -2, "openblas");
  lua_pushstring(L, core ? core : "unknown");
  lua_setfield(L, -2, "core");
  if (env && *env) {
    lua_pushstring(L, env);
    lua_setfield(L, -2, "coretype");
  }
  return 1;
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
  {"max_threads", l_max_threads}, {"gemm_clock", l_gemm_clock}, {"environment", l_environment},
  {"bytes_allocated", l_bytes_allocated}, {"clock", l_clock},
  {"last_error", lbbb_last_error}, {NULL, NULL}
};

void lbbb_open_runtime(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
  lua_pushliteral(L, BBB_VERSION);   /* from CMakeLists.txt's project VERSION */
  lua_setfield(L, tb->module, "version");
}
