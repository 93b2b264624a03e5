/*
** lio.c: binding of the data file readers (src/io/idx.c, src/io/input.c).
*/
#include <errno.h>
#include <string.h>

#include "lua/lbbb.h"
#include "io/idx.h"
#include "io/input.h"

/** load_idx(path [, scale [, offset [, limit [, max_bytes]]]]) -> tensor
** An IDX file of unsigned bytes (raw or gzipped) as floats byte * scale +
** offset, at most limit items. A file declaring more than max_bytes data
** bytes (default 2 GiB) is refused before anything is read. */
static int l_load_idx(lua_State *L) {
  lua_settop(L, 5);
  const char *path = lbbb_check_path(L, 1, "path");
  bbb_idx_opts o = bbb_idx_defaults();
  o.scale = lbbb_opt_finite(L, 2, "scale", 1);
  o.offset = lbbb_opt_finite(L, 3, "offset", 0);
  if (!lbbb_float_fits(255 * o.scale + o.offset) || !lbbb_float_fits(o.offset))
    return lbbb_argerror(L, 2, "scale", "bytes times %f plus %f overflow float32", o.scale, o.offset);
  o.limit = lbbb_opt_int_range(L, 4, "limit", -1, LUA_MAXINTEGER, -1);
  o.max_bytes = (uint64_t)lbbb_opt_int_range(L, 5, "max_bytes", 0, LUA_MAXINTEGER,
                                             (lua_Integer)o.max_bytes);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_idx_load_opts(&u->t, path, &o));
  return 1;
}

/* path_kind(path) -> "file" | "directory" | "fifo" | "device" | "socket" |
** "other", or nil and a message: what path is, from stat, without opening
** it (opening a FIFO to test that it exists would block). */
static int l_path_kind(lua_State *L) {
  const char *path = lbbb_check_path(L, 1, "path");
  const char *k = bbb_path_kind(path);
  if (k) { lua_pushstring(L, k); return 1; }
  luaL_pushfail(L);
  lua_pushfstring(L, "%s: %s", path, strerror(errno));
  return 2;
}

static const luaL_Reg funcs[] = {
  {"load_idx", l_load_idx}, {"path_kind", l_path_kind}, {NULL, NULL}
};

void lbbb_open_io(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
