/*
** lcheckpoint.c: the byte-moving half of bbb.checkpoint (src/core/
** safetensors.c). The JSON header is built and checked in Lua.
*/
#include <stdlib.h>
#include <string.h>

#include "lbbb.h"
#include "safetensors.h"

/* A path with an embedded NUL would name another file than the caller's. */
static const char *check_path(lua_State *L, int i, const char *what) {
  size_t len;
  const char *p = luaL_checklstring(L, i, &len);
  if (strlen(p) != len) luaL_error(L, "%s: the path contains a NUL byte", what);
  if (len == 0) luaL_error(L, "%s: the path is empty", what);
  return p;
}

/* st_save(path, header, {t1, t2, ...}): the header's offsets must match the
** tensors' sizes in this order (the Lua side builds both). */
static int l_st_save(lua_State *L) {
  const char *path = check_path(L, 1, "save");
  size_t hlen;
  const char *header = luaL_checklstring(L, 2, &hlen);
  luaL_checktype(L, 3, LUA_TTABLE);
  int n = (int)luaL_len(L, 3);
  bbb_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 3, i + 1);
    ts[i] = lbbb_check_tensor(L, -1);   /* kept alive by the table */
    lua_pop(L, 1);
  }
  lbbb_check(L, bbb_st_save(path, header, hlen, ts, n));
  return 0;
}

/* st_header(path) -> header string, data start offset, data length */
static int l_st_header(lua_State *L) {
  const char *path = check_path(L, 1, "load");
  char *h;
  uint64_t hl, dl;
  lbbb_check(L, bbb_st_read_header(path, &h, &hl, &dl));
  lua_pushlstring(L, h, (size_t)hl);   /* may raise on memory: free first */
  free(h);
  lua_pushinteger(L, (lua_Integer)(8 + hl));
  lua_pushinteger(L, (lua_Integer)dl);
  return 3;
}

static uint64_t check_offset(lua_State *L, int i, const char *what) {
  lua_Integer v = luaL_checkinteger(L, i);
  if (v < 0) luaL_error(L, "load: %s offset is negative (%I)", what, v);
  return (uint64_t)v;
}

/* st_tensor(path, data_start, begin, end, shape) -> float32 tensor */
static int l_st_tensor(lua_State *L) {
  const char *path = check_path(L, 1, "load");
  uint64_t start = check_offset(L, 2, "data"), begin = check_offset(L, 3, "begin"),
           end = check_offset(L, 4, "end");
  int64_t shape[BBB_MAXDIM];
  luaL_checktype(L, 5, LUA_TTABLE);
  int nd = lbbb_get_shape(L, 5, shape, "load");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_st_read_tensor(&u->t, path, start, begin, end, nd, shape));
  return 1;
}

static const luaL_Reg funcs[] = {
  {"st_save", l_st_save}, {"st_header", l_st_header}, {"st_tensor", l_st_tensor},
  {NULL, NULL}
};

void lbbb_open_checkpoint(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
