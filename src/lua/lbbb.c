/*
** lbbb.c: luaopen for bbb.core. One table holds the module functions; the
** bbb.Tensor metatable and its methods table (bbb.core.Tensor, open to
** extension from Lua) are filled by one opener per binding file.
*/
#include <signal.h>

#include "lua/lbbb.h"

typedef void (*lbbb_opener)(lua_State *L, const lbbb_tables *tb);

static const lbbb_opener openers[] = {
  lbbb_open_tensor, lbbb_open_ops, lbbb_open_autograd, lbbb_open_print,
  lbbb_open_runtime, lbbb_open_rng, lbbb_open_bayes, lbbb_open_optim, lbbb_open_io,
  lbbb_open_help,
  lbbb_open_checkpoint, lbbb_open_signal, lbbb_open_rdata, lbbb_open_sys,
  lbbb_open_conv, lbbb_open_csv, lbbb_open_mlp, lbbb_open_linalg, lbbb_open_vec,
};

void lbbb_pushfunction(lua_State *L, lua_CFunction f, const char *name, int nup) {
  lua_pushstring(L, name);
  lua_insert(L, -nup - 1);
  lua_pushcclosure(L, f, nup + 1);
}

static void push_named(lua_State *L, lua_CFunction f, const char *prefix, const char *name) {
  lua_pushfstring(L, "%s%s", prefix, name);
  lbbb_pushfunction(L, f, lua_tostring(L, -1), 0);
  lua_remove(L, -2);
}

void lbbb_register(lua_State *L, const lbbb_tables *tb, const luaL_Reg *methods,
                   const luaL_Reg *funcs, const luaL_Reg *meta) {
  for (const luaL_Reg *r = methods; r && r->name; r++) {
    push_named(L, r->func, "bbb.", r->name);
    lua_pushvalue(L, -1);
    lua_setfield(L, tb->methods, r->name);
    lua_setfield(L, tb->module, r->name);
  }
  for (const luaL_Reg *r = funcs; r && r->name; r++) {
    push_named(L, r->func, "bbb.", r->name);
    lua_setfield(L, tb->module, r->name);
  }
  for (const luaL_Reg *r = meta; r && r->name; r++) {
    push_named(L, r->func, "bbb.Tensor.", r->name);
    lua_setfield(L, tb->meta, r->name);
  }
}

void lbbb_register_internal(lua_State *L, const lbbb_tables *tb, const luaL_Reg *funcs) {
  for (const luaL_Reg *r = funcs; r && r->name; r++) {
    push_named(L, r->func, "bbb.core.", r->name);
    lua_setfield(L, tb->module, r->name);
  }
}

int lbbb_open(lua_State *L) {
  luaL_checkversion(L);
  /* Tensor bytes are reported to the collector as debt (lbbb_account).
  ** The generational mode that lua5.4 starts in drops that debt at every
  ** minor collection, and temporaries then pile up by the gigabyte; the
  ** incremental mode pays it off. */
  lua_gc(L, LUA_GCINC, 0, 0, 0);
  /* Past a file size limit (ulimit -f) a write fails with EFBIG, which bbb
  ** reports naming the file, instead of SIGXFSZ ending the process with no
  ** word and a temporary file left behind. */
  signal(SIGXFSZ, SIG_IGN);
  lua_newtable(L);
  lbbb_tables tb;
  tb.module = lua_gettop(L);
  luaL_newmetatable(L, BBB_TENSOR_MT);
  tb.meta = lua_gettop(L);
  lua_newtable(L);
  tb.methods = lua_gettop(L);
  lua_pushvalue(L, tb.methods);
  lua_setfield(L, tb.module, "Tensor");
  for (size_t k = 0; k < sizeof openers / sizeof openers[0]; k++) openers[k](L, &tb);
  lua_settop(L, tb.module);
  return 1;
}
