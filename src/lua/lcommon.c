/*
** lcommon.c: what every binding file shares: tensor userdata, argument
** checks, shapes, and the one way a core status becomes a Lua error.
*/
#include <string.h>

#include "lbbb.h"

/* ---- userdata, errors, GC pressure ---- */

lbbb_tensor_ud *lbbb_new_tensor(lua_State *L) {
  lbbb_tensor_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->t = NULL;
  luaL_setmetatable(L, BBB_TENSOR_MT);
  return u;
}

void lbbb_push_tensor(lua_State *L, bbb_tensor *t) {
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  bbb_tensor_retain(t);
  u->t = t;
}

bbb_tensor *lbbb_check_tensor(lua_State *L, int i) {
  lbbb_tensor_ud *u = luaL_testudata(L, i, BBB_TENSOR_MT);
  if (!u) luaL_typeerror(L, i, "tensor");
  if (!u->t) luaL_error(L, "tensor is closed");
  return u->t;
}

bbb_tensor *lbbb_opt_tensor(lua_State *L, int i) {
  return lua_isnoneornil(L, i) ? NULL : lbbb_check_tensor(L, i);
}

/* Lua's collector sees only the small userdata; tell it about the bytes
** behind them so temporaries are freed at the pace they are made. */
void lbbb_account(lua_State *L) {
  static int64_t seen, after_full;
  int64_t now = bbb_bytes_allocated();
  if (now > seen + (1 << 16)) {
    int64_t kb = (now - seen) >> 10;
    seen = now;
    lua_gc(L, LUA_GCSTEP, (int)(kb > (1 << 30) ? (1 << 30) : kb));
  } else if (now < seen) {
    seen = now;
  }
  /* A safety net for a host that switched the collector back to the
  ** generational mode, which forgets the debt: collect in full when tensor
  ** memory has more than doubled since the last full collection. */
  if (now > 2 * after_full + ((int64_t)64 << 20)) {
    lua_gc(L, LUA_GCCOLLECT);
    after_full = seen = bbb_bytes_allocated();
  }
}

void lbbb_check(lua_State *L, int status) {
  if (status != BBB_OK) luaL_error(L, "%s", bbb_errmsg());
  lbbb_account(L);
}

int lbbb_get_shape(lua_State *L, int i, int64_t *shape, const char *what) {
  int n = 0;
  if (lua_istable(L, i)) {
    n = (int)luaL_len(L, i);
    if (n > BBB_MAXDIM) luaL_error(L, "%s: at most %d dimensions, got %d", what, BBB_MAXDIM, n);
    for (int k = 0; k < n; k++) {
      lua_geti(L, i, k + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok) luaL_error(L, "%s: size %d is not an integer (%s)", what, k + 1,
                          luaL_tolstring(L, -1, NULL));
      if (v < 0) luaL_error(L, "%s: size %d is negative (%d)", what, k + 1, (int)v);
      shape[k] = v;
      lua_pop(L, 1);
    }
    return n;
  }
  while (lua_type(L, i + n) == LUA_TNUMBER) {
    if (n == BBB_MAXDIM) luaL_error(L, "%s: at most %d dimensions", what, BBB_MAXDIM);
    int ok;
    lua_Integer v = lua_tointegerx(L, i + n, &ok);
    if (!ok) luaL_error(L, "%s: size %d is not an integer (%s)", what, n + 1,
                        luaL_tolstring(L, i + n, NULL));
    if (v < 0) luaL_error(L, "%s: size %d is negative (%d)", what, n + 1, (int)v);
    shape[n++] = v;
  }
  return n;
}


int lbbb_check_dim(lua_State *L, int i, const bbb_tensor *t, const char *op) {
  lua_Integer d = luaL_checkinteger(L, i);
  if (d < 0) d += t->ndim + 1;
  if (d < 1 || d > t->ndim) {
    char s[96];
    luaL_error(L, "%s: dimension %d out of range for a %d-d tensor %s", op,
               (int)luaL_checkinteger(L, i), t->ndim, bbb_shape_str(t, s, sizeof s));
  }
  return (int)d - 1;
}

int lbbb_result(lua_State *L, int status) {
  lbbb_check(L, status);
  return 1;
}
