/*
** lcheckpoint.c: the byte-moving half of bbb.checkpoint (src/io/
** safetensors.c). The JSON header is built and checked in Lua.
*/
#include <stdlib.h>
#include <string.h>

#include "lua/lbbb.h"
#include "io/safetensors.h"

/* st_save(path, header, {t1, t2, ...}): the header's offsets must match the
** tensors' sizes in this order (the Lua side builds both). */
static int l_st_save(lua_State *L) {
  const char *path = lbbb_check_path(L, 1, "path");
  size_t hlen;
  if (lua_type(L, 2) != LUA_TSTRING) return lbbb_typeerror(L, 2, "header", "a string");
  const char *header = lua_tolstring(L, 2, &hlen);
  lbbb_check_table(L, 3, "tensors");
  int n = (int)luaL_len(L, 3);
  bbb_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 3, i + 1);
    if (!lbbb_is_tensor(L, -1))
      return lbbb_argerror(L, 3, "tensors", "entry %d is a %s, not a tensor", i + 1, luaL_typename(L, -1));
    ts[i] = lbbb_check_tensor(L, -1, "tensors");   /* kept alive by the table */
    lua_pop(L, 1);
  }
  lbbb_check(L, bbb_st_save(path, header, hlen, ts, n));
  return 0;
}

/* ---- reading: st_open(path) -> reader; st_header(reader); st_tensor(reader, ...).
** Every read of one load goes through the reader's one descriptor. */

#define READER_MT "bbb.CheckpointReader"

typedef struct { bbb_st_file f; } reader_ud;

static int reader_close(lua_State *L) {
  reader_ud *r = luaL_testudata(L, 1, READER_MT);
  if (r) bbb_st_close(&r->f);
  return 0;
}

static reader_ud *check_reader(lua_State *L, int arg) {
  reader_ud *r = luaL_testudata(L, arg, READER_MT);
  if (!r) lbbb_typeerror(L, arg, "reader", "a checkpoint reader from st_open");
  if (r->f.fd < 0) lbbb_argerror(L, arg, "reader", "the reader is closed");
  return r;
}

/* The path the reader was opened with (its user value), for messages. */
static const char *reader_path(lua_State *L, int arg) {
  lua_getiuservalue(L, arg, 1);
  const char *p = lua_tostring(L, -1);
  lua_pop(L, 1);   /* the user value keeps the string alive */
  return p ? p : "?";
}

/* st_open(path) -> reader (also a <close> variable) */
static int l_st_open(lua_State *L) {
  const char *path = lbbb_check_path(L, 1, "path");
  reader_ud *r = lua_newuserdatauv(L, sizeof *r, 1);
  r->f.fd = -1;
  luaL_setmetatable(L, READER_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lbbb_check(L, bbb_st_open(&r->f, path));
  return 1;
}

/* st_header(reader) -> header string, data start offset, data length.
** A header naming a key twice in any object is refused here: the JSON
** decoder would keep one of the two silently. */
static int l_st_header(lua_State *L) {
  reader_ud *r = check_reader(L, 1);
  const char *path = reader_path(L, 1);
  char *h, dup[128];
  uint64_t hl, dl;
  int found = 0;
  lbbb_check(L, bbb_st_read_header(&r->f, path, &h, &hl, &dl));
  int st = bbb_st_duplicate_key(h, (size_t)hl, &found, dup, sizeof dup);
  if (!st && found)
    st = bbb_error(BBB_EIO, "load: '%s': the header names \"%s\" twice", path, dup);
  if (st) { free(h); lbbb_check(L, st); }
  lua_pushlstring(L, h, (size_t)hl);   /* may raise on memory: free first */
  free(h);
  lua_pushinteger(L, (lua_Integer)(8 + hl));
  lua_pushinteger(L, (lua_Integer)dl);
  return 3;
}

static uint64_t check_offset(lua_State *L, int arg, const char *name) {
  return (uint64_t)lbbb_check_int_range(L, arg, name, 0, LUA_MAXINTEGER);
}

/* st_tensor(reader, name, data_start, begin, end, shape) -> float32 tensor */
static int l_st_tensor(lua_State *L) {
  reader_ud *r = check_reader(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) return lbbb_typeerror(L, 2, "name", "a string");
  const char *name = lua_tostring(L, 2);
  uint64_t start = check_offset(L, 3, "data_start"), begin = check_offset(L, 4, "begin"),
           end = check_offset(L, 5, "end");
  int64_t shape[BBB_MAXDIM];
  lbbb_check_table(L, 6, "sizes");
  int nd = lbbb_check_sizes(L, 6, 6, shape, 0);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_st_read_tensor(&u->t, &r->f, reader_path(L, 1), name, start, begin, end,
                                   nd, shape));
  return 1;
}

static const luaL_Reg funcs[] = {
  {"st_save", l_st_save}, {"st_open", l_st_open}, {"st_header", l_st_header},
  {"st_tensor", l_st_tensor}, {"st_close", reader_close},
  {NULL, NULL}
};

void lbbb_open_checkpoint(lua_State *L, const lbbb_tables *tb) {
  if (luaL_newmetatable(L, READER_MT)) {
    lbbb_pushfunction(L, reader_close, "bbb.core.st_close", 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__gc");
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  lbbb_register_internal(L, tb, funcs);
}
