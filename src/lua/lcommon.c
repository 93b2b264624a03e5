/*
** lcommon.c: what every binding file shares: tensor userdata, argument
** checks, shapes, and the one way a core status becomes a Lua error.
*/
#include <string.h>

#include "lbbb.h"
#include "parallel.h"

static const char *LAST_ERROR_KEY = "bbb.last_error";

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
** behind them so temporaries are freed at the pace they are made. The
** debt is handed over once the tensor bytes made since the last finished
** cycle reach a quarter of those live after it, as Lua paces its own heap
** against what survived: a training step that makes its temporaries in
** twenty allocations then pays for one cycle, not for one per allocation. */
#define GC_PAUSE_DIV 4

void lbbb_account(lua_State *L) {
  static int64_t seen, after_full, pending, live;
  int64_t now = bbb_bytes_allocated();
  if (now > seen + (1 << 16)) {
    pending += now - seen;
    seen = now;
    if (pending > live / GC_PAUSE_DIV) {
      int64_t kb = pending >> 10;
      pending = 0;
      if (lua_gc(L, LUA_GCSTEP, (int)(kb > (1 << 30) ? (1 << 30) : kb)))
        live = bbb_bytes_allocated();
    }
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

/* A loop cut short by Ctrl-C returns normally with partial results: the
** interrupt flag turns that into an error too. The kind of the last error
** is kept for last_error(). */
void lbbb_check(lua_State *L, int status) {
  if (status == BBB_OK && bbb_interrupted()) status = bbb_error(BBB_EINTR, "interrupted");
  if (status != BBB_OK) {
    if (status == BBB_EINTR) {
      bbb_interrupt_clear();
      /* The interpreter's Ctrl-C hook (lua.c's lstop, which bbblua copies:
      ** every event, count 1) would raise a second "interrupted!" over this
      ** message at the next event; this error already serves it. */
      if (lua_gethookmask(L) == (LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT) &&
          lua_gethookcount(L) == 1)
        lua_sethook(L, NULL, 0, 0);
    }
    lua_pushstring(L, bbb_status_name(status));
    lua_setfield(L, LUA_REGISTRYINDEX, LAST_ERROR_KEY);
    luaL_error(L, "%s", bbb_errmsg());
  }
  lbbb_account(L);
}

/* last_error() -> kind, message of the last error a core function raised:
** kind is "shape", "argument", "index", "memory", "graph", "io", "value"
** or "interrupted"; nil when none has been raised. */
int lbbb_last_error(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LAST_ERROR_KEY);
  if (lua_isnil(L, -1)) return 1;
  lua_pushstring(L, bbb_errmsg());
  return 2;
}

/* One size at stack index at (entry k, 1-based, for messages). Sizes are
** Lua numbers with an integer value; strings are refused rather than
** converted, so {"3"} is an error as {"a"} is. allow_infer admits -1. */
static int64_t shape_entry(lua_State *L, int at, int k, const char *what, int allow_infer) {
  int ok = 0;
  lua_Integer v = 0;
  if (lua_type(L, at) == LUA_TNUMBER) v = lua_tointegerx(L, at, &ok);
  if (!ok) {
    if (lua_type(L, at) == LUA_TNUMBER)
      luaL_error(L, "%s: size %d is not an integer (%s)", what, k,
                 luaL_tolstring(L, at, NULL));
    if (lua_type(L, at) == LUA_TSTRING)
      luaL_error(L, "%s: size %d is a string (\"%s\"), not an integer", what, k,
                 lua_tostring(L, at));
    luaL_error(L, "%s: size %d is a %s, not an integer", what, k, luaL_typename(L, at));
  }
  if (v < 0 && !(allow_infer && v == -1))
    luaL_error(L, "%s: size %d is negative (%I)", what, k, v);
  return (int64_t)v;
}

static int read_shape(lua_State *L, int i, int64_t *shape, const char *what, int allow_infer) {
  int n = 0;
  if (lua_istable(L, i)) {
    lua_Integer len = luaL_len(L, i);
    if (len > BBB_MAXDIM) luaL_error(L, "%s: at most %d dimensions, got %I", what, BBB_MAXDIM, len);
    n = (int)len;
    for (int k = 0; k < n; k++) {
      lua_geti(L, i, k + 1);
      shape[k] = shape_entry(L, lua_gettop(L), k + 1, what, allow_infer);
      lua_pop(L, 1);
    }
    return n;
  }
  while (lua_type(L, i + n) == LUA_TNUMBER) {
    if (n == BBB_MAXDIM) luaL_error(L, "%s: at most %d dimensions", what, BBB_MAXDIM);
    shape[n] = shape_entry(L, i + n, n + 1, what, allow_infer);
    n++;
  }
  return n;
}

int lbbb_get_shape(lua_State *L, int i, int64_t *shape, const char *what) {
  return read_shape(L, i, shape, what, 0);
}

int lbbb_get_shape_infer(lua_State *L, int i, int64_t *shape, const char *what) {
  return read_shape(L, i, shape, what, 1);
}

int64_t lbbb_shape_numel(lua_State *L, int nd, const int64_t *shape, const char *what) {
  int64_t n = 1;
  for (int k = 0; k < nd; k++)
    if (shape[k] >= 0 && __builtin_mul_overflow(n, shape[k], &n))
      luaL_error(L, "%s: the sizes multiply past 2^63 elements (size %d is %I)", what, k + 1,
                 (lua_Integer)shape[k]);
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
