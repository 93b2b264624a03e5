/*
** lio.c: binding of the data file readers (src/core/io.c).
*/
#include "lbbb.h"
#include "io.h"

/* load_idx(path [, scale [, offset [, limit]]]) */
static int l_load_idx(lua_State *L) {
  lua_settop(L, 4);
  const char *path = luaL_checkstring(L, 1);
  lua_Number scale = luaL_optnumber(L, 2, 1), offset = luaL_optnumber(L, 3, 0);
  lua_Integer limit = luaL_optinteger(L, 4, -1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_idx_load(&u->t, path, scale, offset, limit));
  return 1;
}

static const luaL_Reg funcs[] = { {"load_idx", l_load_idx}, {NULL, NULL} };

void lbbb_open_io(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
