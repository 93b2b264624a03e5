/*
** lhelp.c: the doc comments of the binding and the Lua library, gathered
** at build time (cmake/gendoc.lua) for bbb.help.
*/
#include "lua/lbbb.h"
#include "bbb_docs.h"

/** docs() -> string
** A Lua chunk returning every documented name with its signatures and text,
** collected from the sources' doc comments when bbb was built. */
static int l_docs(lua_State *L) {
  lua_pushlstring(L, bbb_docs_chunk, sizeof bbb_docs_chunk - 1);
  return 1;
}

static const luaL_Reg funcs[] = { {"docs", l_docs}, {NULL, NULL} };

void lbbb_open_help(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
