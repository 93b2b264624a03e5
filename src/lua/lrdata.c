/*
** lrdata.c: binding of the R data reader (src/io/rdata.c).
**
**   rdata_frame(path)        -> {name =, n_rows =, columns = {{name =, levels = {...}}, ...},
**                                codes = (n_rows, n_cols) tensor: level 1..L, 0 for NA}
**   rdata_frame_bytes(bytes) -> the same from a string holding the file's bytes
**   rdata_lazy(rdx_path, rdb_path, name)   -> data set `name` of a lazy-load database
**   rdata_lazy_bytes(rdx, rdb, name)       -> the same from strings
** A numeric column has numeric = true and its values (NaN for NA) in codes.
*/
#include <string.h>

#include "lua/lbbb.h"
#include "io/rdata.h"

#define RDATA_MT "bbb.RDataFrame"

/* The parsed frame lives in a userdata with a finaliser, so an error while
** its Lua table is built leaves nothing for C to free. */
static bbb_rdata_frame *new_frame(lua_State *L) {
  bbb_rdata_frame *f = lua_newuserdatauv(L, sizeof *f, 0);
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, RDATA_MT);
  return f;
}

static int frame_gc(lua_State *L) {
  bbb_rdata_frame_free(lua_touserdata(L, 1));   /* only ever set on frames */
  return 0;
}

/* Leaves the result table on top, above the frame's userdata. */
static int push_frame(lua_State *L, const bbb_rdata_frame *f) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, f->object_name ? f->object_name : "");
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, f->n_rows);
  lua_setfield(L, -2, "n_rows");
  lua_createtable(L, f->n_cols, 0);
  for (int j = 0; j < f->n_cols; j++) {
    const bbb_rdata_factor *c = &f->cols[j];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, c->name);
    lua_setfield(L, -2, "name");
    lua_pushboolean(L, c->numeric);
    lua_setfield(L, -2, "numeric");
    lua_createtable(L, c->n_levels, 0);
    for (int k = 0; k < c->n_levels; k++) {
      lua_pushstring(L, c->levels[k]);
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "levels");
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "columns");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  int64_t shape[2] = { f->n_rows, f->n_cols };
  u->t = bbb_tensor_new(2, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_error(BBB_EMEM, "rdata: out of memory for the codes"));
  bbb_float *d = bbb_data(u->t);
  for (int j = 0; j < f->n_cols; j++) {
    const bbb_rdata_factor *c = &f->cols[j];
    for (int64_t i = 0; i < f->n_rows; i++)
      d[i * f->n_cols + j] = c->numeric ? (bbb_float)c->values[i] : (bbb_float)c->codes[i];
  }
  lua_setfield(L, -2, "codes");
  return 1;
}

static int l_rdata_frame(lua_State *L) {
  const char *path = lbbb_check_path(L, 1, "path");
  bbb_rdata_frame *f = new_frame(L);
  lbbb_check(L, bbb_rdata_load_frame(path, f));
  return push_frame(L, f);
}

static int l_rdata_frame_bytes(lua_State *L) {
  size_t n;
  if (lua_type(L, 1) != LUA_TSTRING) return lbbb_typeerror(L, 1, "bytes", "a string");
  const char *s = lua_tolstring(L, 1, &n);
  bbb_rdata_frame *f = new_frame(L);
  lbbb_check(L, bbb_rdata_parse_frame((const unsigned char *)s, n, f));
  return push_frame(L, f);
}

/** rdata_lazy(rdx_path, rdb_path, name) -> {name =, n_rows =, columns =, codes =}
** Data set `name` of an installed R package's lazy-load database
** (data/Rdata.rdx + Rdata.rdb): numeric columns' values and factors' codes
** (0 for NA) in codes; bbb.data.load_r builds a data set from it. */
static int l_rdata_lazy(lua_State *L) {
  const char *rdx = luaL_checkstring(L, 1), *rdb = luaL_checkstring(L, 2), *name = luaL_checkstring(L, 3);
  bbb_rdata_frame *f = new_frame(L);
  lbbb_check(L, bbb_rdata_load_lazy(rdx, rdb, name, f));
  return push_frame(L, f);
}

/** rdata_lazy_bytes(rdx, rdb, name) -> the same as rdata_lazy, from strings. */
static int l_rdata_lazy_bytes(lua_State *L) {
  size_t nx, nb;
  const char *rdx = luaL_checklstring(L, 1, &nx), *rdb = luaL_checklstring(L, 2, &nb);
  const char *name = luaL_checkstring(L, 3);
  bbb_rdata_frame *f = new_frame(L);
  lbbb_check(L, bbb_rdata_parse_lazy((const unsigned char *)rdx, nx, (const unsigned char *)rdb, nb, name, f));
  return push_frame(L, f);
}

static const luaL_Reg funcs[] = {
  {"rdata_frame", l_rdata_frame}, {"rdata_frame_bytes", l_rdata_frame_bytes},
  {"rdata_lazy", l_rdata_lazy}, {"rdata_lazy_bytes", l_rdata_lazy_bytes}, {NULL, NULL}
};

void lbbb_open_rdata(lua_State *L, const lbbb_tables *tb) {
  if (luaL_newmetatable(L, RDATA_MT)) {
    lua_pushcfunction(L, frame_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lbbb_register_internal(L, tb, funcs);
}
