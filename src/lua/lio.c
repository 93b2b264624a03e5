/*
** lio.c: binding of the data file readers (src/core/io.c).
*/
#include <string.h>

#include "lbbb.h"
#include "io.h"

/** load_idx(path [, scale [, offset [, limit [, max_bytes]]]]) -> tensor
** An IDX file of unsigned bytes (raw or gzipped) as floats byte * scale +
** offset, at most limit items. A file declaring more than max_bytes data
** bytes (default 2 GiB) is refused before anything is read. */
static int l_load_idx(lua_State *L) {
  lua_settop(L, 5);
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  if (strlen(path) != len) return luaL_error(L, "load_idx: path contains a NUL byte");
  bbb_idx_opts o = bbb_idx_defaults();
  o.scale = luaL_optnumber(L, 2, 1);
  o.offset = luaL_optnumber(L, 3, 0);
  o.limit = luaL_optinteger(L, 4, -1);
  if (!lua_isnoneornil(L, 5)) {
    lua_Integer m = luaL_checkinteger(L, 5);
    if (m < 0) return luaL_error(L, "load_idx: max_bytes must be >= 0, got %I", m);
    o.max_bytes = (uint64_t)m;
  }
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_idx_load_opts(&u->t, path, &o));
  return 1;
}

static const luaL_Reg funcs[] = { {"load_idx", l_load_idx}, {NULL, NULL} };

void lbbb_open_io(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
