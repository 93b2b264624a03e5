/*
** lcsv.c: binding of the CSV reader (src/io/csvread.c).
**
**   read_csv(path [, opts])        -> {x = (n, k) tensor, y = (n) tensor or nil, n_rows =,
**                                      n_dropped =, columns = {{name =, categorical =, levels = {...}}},
**                                      target = {name =, categorical =, levels =} or nil}
**   read_csv_string(text [, opts]) -> the same from a string
** opts: delimiter, quote (one character each), header (boolean), drop_missing
** (boolean), max_levels (integer), na, categorical, ignore (lists of
** strings), target (string).
*/
#include <string.h>

#include "lua/lbbb.h"
#include "io/csvread.h"

#define CSV_MT "bbb.CSVTable"

static int table_gc(lua_State *L) {
  bbb_csv_free(luaL_checkudata(L, 1, CSV_MT));
  return 0;
}

static int opt_char(lua_State *L, const char *fn, const char *key, unsigned char def) {
  int t = lua_getfield(L, 2, key);
  unsigned char c = def;
  if (t != LUA_TNIL) {
    size_t n = 0;
    const char *s = t == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (!s || n != 1)
      luaL_error(L, "%s: argument 2 (opts): %s must be one character, got %s", fn, key,
                 s ? "a string of another length" : luaL_typename(L, -1));
    c = (unsigned char)s[0];
  }
  lua_pop(L, 1);
  return c;
}

static int opt_bool(lua_State *L, const char *fn, const char *key, int def) {
  int t = lua_getfield(L, 2, key), v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TBOOLEAN) luaL_error(L, "%s: argument 2 (opts): %s must be a boolean, got %s", fn, key,
                                      luaL_typename(L, -1));
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* A list of strings, as an array kept alive by a userdata left on the stack. */
static const char *const *opt_list(lua_State *L, const char *fn, const char *key, int *n,
                                   const char *const *def, int ndef) {
  int t = lua_getfield(L, 2, key);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushnil(L);   /* keep the stack shape */
    *n = ndef;
    return def;
  }
  if (t == LUA_TSTRING) {   /* one name */
    lua_createtable(L, 1, 0);
    lua_insert(L, -2);
    lua_rawseti(L, -2, 1);
  } else if (t != LUA_TTABLE) {
    luaL_error(L, "%s: argument 2 (opts): %s must be a list of strings, got %s", fn, key, luaL_typename(L, -1));
  }
  int len = (int)luaL_len(L, -1);
  const char **a = lua_newuserdatauv(L, sizeof *a * (size_t)(len > 0 ? len : 1), 1);
  lua_pushvalue(L, -2);
  lua_setiuservalue(L, -2, 1);   /* the strings live as long as the array */
  for (int i = 1; i <= len; i++) {
    size_t sl;
    if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
      luaL_error(L, "%s: argument 2 (opts): %s[%d] must be a string, got %s", fn, key, i, luaL_typename(L, -1));
    a[i - 1] = lua_tolstring(L, -1, &sl);
    if (strlen(a[i - 1]) != sl) luaL_error(L, "%s: argument 2 (opts): %s[%d] contains a NUL byte", fn, key, i);
    lua_pop(L, 1);
  }
  lua_remove(L, -2);
  *n = len;
  return a;
}

static void get_options(lua_State *L, const char *fn, bbb_csv_options *o) {
  *o = bbb_csv_defaults();
  if (lua_isnoneornil(L, 2)) { lua_settop(L, 1); lua_newtable(L); }
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  o->delim = (unsigned char)opt_char(L, fn, "delimiter", o->delim);
  o->quote = (unsigned char)opt_char(L, fn, "quote", o->quote);
  o->header = opt_bool(L, fn, "header", o->header);
  o->drop_missing = opt_bool(L, fn, "drop_missing", o->drop_missing);
  o->keep_missing = opt_bool(L, fn, "keep_missing", o->keep_missing);
  if (lua_getfield(L, 2, "max_levels") != LUA_TNIL) {
    int ok = 0;
    lua_Integer m = lua_tointegerx(L, -1, &ok);
    if (!ok || m < 1 || m > 1000000)
      luaL_error(L, "%s: argument 2 (opts): max_levels must be an integer in 1..1000000", fn);
    o->max_levels = (int)m;
  }
  lua_pop(L, 1);
  o->na = opt_list(L, fn, "na", &o->n_na, o->na, o->n_na);                                   /* index 3 */
  o->categorical = opt_list(L, fn, "categorical", &o->n_categorical, NULL, 0);            /* 4 */
  o->ignore = opt_list(L, fn, "ignore", &o->n_ignore, NULL, 0);                           /* 5 */
  int t = lua_getfield(L, 2, "target");                                                   /* 6 */
  if (t != LUA_TNIL && t != LUA_TSTRING)
    luaL_error(L, "%s: argument 2 (opts): target must be a column name, got %s", fn, luaL_typename(L, -1));
  o->target = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
}

static void push_column(lua_State *L, const bbb_csv_column *c) {
  lua_createtable(L, 0, 3);
  lua_pushstring(L, c->name);
  lua_setfield(L, -2, "name");
  lua_pushboolean(L, c->categorical);
  lua_setfield(L, -2, "categorical");
  lua_createtable(L, c->n_levels, 0);
  for (int k = 0; k < c->n_levels; k++) {
    lua_pushstring(L, c->levels[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "levels");
}

static int push_table(lua_State *L, bbb_csv_table *t) {
  lua_createtable(L, 0, 7);
  lua_pushinteger(L, t->n_rows);
  lua_setfield(L, -2, "n_rows");
  lua_pushinteger(L, t->n_dropped);
  lua_setfield(L, -2, "n_dropped");
  lua_createtable(L, t->n_cols, 0);
  for (int j = 0; j < t->n_cols; j++) {
    push_column(L, &t->cols[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "columns");
  if (t->has_target) {
    push_column(L, &t->target);
    lua_setfield(L, -2, "target");
    lbbb_push_tensor(L, t->y);
    lua_setfield(L, -2, "y");
    if (t->y_exact) {
      lua_createtable(L, (int)t->n_rows, 0);
      for (int64_t i = 0; i < t->n_rows; i++) {
        lua_pushnumber(L, t->y_exact[i]);
        lua_rawseti(L, -2, i + 1);
      }
      lua_setfield(L, -2, "y_exact");
    }
  }
  lbbb_push_tensor(L, t->x);
  lua_setfield(L, -2, "x");
  lbbb_account(L);
  return 1;
}

static bbb_csv_table *new_table(lua_State *L) {
  bbb_csv_table *t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t);
  luaL_setmetatable(L, CSV_MT);
  return t;
}

/** read_csv(path [, opts]) -> {x =, y =, n_rows =, n_dropped =, columns =, target =}
** The raw table of a CSV file, parsed by libcsv: numbers as floats,
** categories as codes 1..L (bbb.data.read_csv makes them one-hot). opts:
** delimiter, quote, header, drop_missing, max_levels, na, categorical,
** ignore, target. Errors name the row and the column. */
static int l_read_csv(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  if (strlen(path) != len) return luaL_error(L, "read_csv: argument 1 (path): contains a NUL byte");
  bbb_csv_options o;
  get_options(L, "read_csv", &o);
  bbb_csv_table *t = new_table(L);
  lbbb_check(L, bbb_csv_read(path, &o, t));
  return push_table(L, t);
}

/** read_csv_string(text [, opts]) -> the same as read_csv, from a string. */
static int l_read_csv_string(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  bbb_csv_options o;
  get_options(L, "read_csv_string", &o);
  bbb_csv_table *t = new_table(L);
  lbbb_check(L, bbb_csv_parse((const unsigned char *)s, len, &o, t));
  return push_table(L, t);
}

/** parse_float(s) -> the float the CSV reader makes of s, or nil when s is
** not a plain decimal number in the float range. */
static int l_parse_float(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  float v;
  if (bbb_csv_parse_float(s, len, &v) != 0) lua_pushnil(L);
  else lua_pushnumber(L, (lua_Number)v);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"read_csv", l_read_csv}, {"read_csv_string", l_read_csv_string}, {"csv_parse_float", l_parse_float},
  {NULL, NULL}
};

void lbbb_open_csv(lua_State *L, const lbbb_tables *tb) {
  if (luaL_newmetatable(L, CSV_MT)) {
    lua_pushcfunction(L, table_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lbbb_register(L, tb, NULL, funcs, NULL);
}
