/*
** lcheck.c: the one family of argument checks, in the style of Lua's own
** luaL_check*: each takes the argument's position and name and raises
**
**   bbb.fn: argument N (name): what was wrong
**
** where bbb.fn is the name the running function was registered under
** (lbbb_register keeps it as the closure's first upvalue). Positions count
** as in bbb.fn(x, ...): a method call x:fn(...) numbers x as argument 1.
*/
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "lua/lbbb.h"

const char *lbbb_fname(lua_State *L) {
  const char *name = lua_tostring(L, lua_upvalueindex(1));
  if (name && strncmp(name, "bbb.", 4) == 0) return name;
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name)
    return lua_pushfstring(L, "bbb.%s", ar.name);   /* left on the stack: the error takes it */
  return "bbb";
}

int lbbb_argerror(lua_State *L, int arg, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *what = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s: argument %d (%s): %s", lbbb_fname(L), arg, name, what);
}

/* "a string", "nil", "a tensor (closed)": what was found instead. */
static const char *found(lua_State *L, int arg) {
  int t = lua_type(L, arg);
  if (t == LUA_TNONE || t == LUA_TNIL) return "nil";
  if (t == LUA_TNUMBER) return lua_pushfstring(L, "%s", luaL_tolstring(L, arg, NULL));
  if (t == LUA_TSTRING) return lua_pushfstring(L, "the string \"%s\"", lua_tostring(L, arg));
  return luaL_typename(L, arg);
}

int lbbb_typeerror(lua_State *L, int arg, const char *name, const char *expected) {
  return lbbb_argerror(L, arg, name, "expected %s, got %s", expected, found(L, arg));
}

bbb_tensor *lbbb_check_tensor(lua_State *L, int arg, const char *name) {
  lbbb_tensor_ud *u = luaL_testudata(L, arg, BBB_TENSOR_MT);
  if (!u) lbbb_typeerror(L, arg, name, "a tensor");
  if (!u->t) lbbb_argerror(L, arg, name, "the tensor is closed");
  return u->t;
}

int lbbb_is_tensor(lua_State *L, int arg) {
  lbbb_tensor_ud *u = luaL_testudata(L, arg, BBB_TENSOR_MT);
  return u && u->t;
}

bbb_tensor *lbbb_opt_tensor(lua_State *L, int arg, const char *name) {
  return lua_isnoneornil(L, arg) ? NULL : lbbb_check_tensor(L, arg, name);
}

/* Numbers are Lua numbers: strings are refused rather than converted. */
lua_Number lbbb_check_number(lua_State *L, int arg, const char *name) {
  if (lua_type(L, arg) != LUA_TNUMBER) lbbb_typeerror(L, arg, name, "a number");
  return lua_tonumber(L, arg);
}

lua_Number lbbb_check_finite(lua_State *L, int arg, const char *name) {
  lua_Number v = lbbb_check_number(L, arg, name);
  if (!isfinite(v)) lbbb_argerror(L, arg, name, "expected a finite number, got %f", v);
  return v;
}

lua_Number lbbb_opt_finite(lua_State *L, int arg, const char *name, lua_Number def) {
  return lua_isnoneornil(L, arg) ? def : lbbb_check_finite(L, arg, name);
}

lua_Number lbbb_check_positive(lua_State *L, int arg, const char *name) {
  lua_Number v = lbbb_check_number(L, arg, name);
  if (!(v > 0) || !isfinite(v))
    lbbb_argerror(L, arg, name, "expected a finite number > 0, got %f", v);
  return v;
}

int lbbb_float_fits(lua_Number v) { return !isfinite(v) || fabs(v) <= FLT_MAX; }

bbb_float lbbb_check_float(lua_State *L, int arg, const char *name) {
  lua_Number v = lbbb_check_number(L, arg, name);
  if (!lbbb_float_fits(v))
    lbbb_argerror(L, arg, name, "%f overflows float32 (largest %f)", v, (lua_Number)FLT_MAX);
  return (bbb_float)v;
}

lua_Integer lbbb_check_integer(lua_State *L, int arg, const char *name) {
  int ok = 0;
  lua_Integer v = 0;
  if (lua_type(L, arg) == LUA_TNUMBER) v = lua_tointegerx(L, arg, &ok);
  if (!ok) lbbb_typeerror(L, arg, name, "an integer");
  return v;
}

lua_Integer lbbb_check_int_range(lua_State *L, int arg, const char *name, lua_Integer lo,
                                 lua_Integer hi) {
  lua_Integer v = lbbb_check_integer(L, arg, name);
  if (v < lo || v > hi) {
    if (hi == LUA_MAXINTEGER) lbbb_argerror(L, arg, name, "expected an integer >= %I, got %I", lo, v);
    lbbb_argerror(L, arg, name, "expected an integer in %I..%I, got %I", lo, hi, v);
  }
  return v;
}

lua_Integer lbbb_opt_int_range(lua_State *L, int arg, const char *name, lua_Integer lo,
                               lua_Integer hi, lua_Integer def) {
  return lua_isnoneornil(L, arg) ? def : lbbb_check_int_range(L, arg, name, lo, hi);
}

int lbbb_check_option(lua_State *L, int arg, const char *name, const char *def,
                      const char *const list[]) {
  const char *s = def && lua_isnoneornil(L, arg) ? def : NULL;
  if (!s) {
    if (lua_type(L, arg) != LUA_TSTRING) lbbb_typeerror(L, arg, name, "a string");
    s = lua_tostring(L, arg);
  }
  for (int k = 0; list[k]; k++)
    if (strcmp(list[k], s) == 0) return k;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int k = 0; list[k]; k++) {
    luaL_addstring(&b, k ? ", \"" : "\"");
    luaL_addstring(&b, list[k]);
    luaL_addchar(&b, '"');
  }
  luaL_pushresult(&b);
  return lbbb_argerror(L, arg, name, "expected one of %s, got \"%s\"", lua_tostring(L, -1), s);
}

void lbbb_check_table(lua_State *L, int arg, const char *name) {
  if (!lua_istable(L, arg)) lbbb_typeerror(L, arg, name, "a table");
}

const char *lbbb_check_path(lua_State *L, int arg, const char *name) {
  size_t len;
  if (lua_type(L, arg) != LUA_TSTRING) lbbb_typeerror(L, arg, name, "a path (a string)");
  const char *p = lua_tolstring(L, arg, &len);
  if (strlen(p) != len) lbbb_argerror(L, arg, name, "the path contains a NUL byte");
  if (len == 0) lbbb_argerror(L, arg, name, "the path is empty");
  return p;
}

/* One size at stack index at: an integer >= 0 (or -1 when infer). k is the
** size's position, 1-based, for the message. */
static int64_t size_entry(lua_State *L, int arg, int at, int k, int infer) {
  int ok = 0;
  lua_Integer v = 0;
  if (lua_type(L, at) == LUA_TNUMBER) v = lua_tointegerx(L, at, &ok);
  if (!ok) {
    const char *what = found(L, at);
    lbbb_argerror(L, arg, "sizes", "size %d is %s, not an integer", k, what);
  }
  if (v < 0 && !(infer && v == -1))
    lbbb_argerror(L, arg, "sizes", "size %d is negative (%I)", k, v);
  return (int64_t)v;
}

int lbbb_check_sizes(lua_State *L, int arg, int last, int64_t *shape, int infer) {
  if (lua_istable(L, arg)) {
    lua_Integer len = luaL_len(L, arg);
    if (len > BBB_MAXDIM)
      lbbb_argerror(L, arg, "sizes", "at most %d sizes, got %I", BBB_MAXDIM, len);
    for (int k = 0; k < (int)len; k++) {
      lua_geti(L, arg, k + 1);
      shape[k] = size_entry(L, arg, lua_gettop(L), k + 1, infer);
      lua_pop(L, 1);
    }
    return (int)len;
  }
  if (arg > last) return 0;
  if (lua_type(L, arg) != LUA_TNUMBER)
    lbbb_typeerror(L, arg, "sizes", "integer sizes or a table of them");
  if (last - arg + 1 > BBB_MAXDIM)
    lbbb_argerror(L, arg, "sizes", "at most %d sizes, got %d", BBB_MAXDIM, last - arg + 1);
  for (int k = 0; arg + k <= last; k++) shape[k] = size_entry(L, arg + k, arg + k, k + 1, infer);
  return last - arg + 1;
}

int64_t lbbb_sizes_numel(lua_State *L, int arg, int nd, const int64_t *shape) {
  int64_t n = 1;
  for (int k = 0; k < nd; k++)
    if (shape[k] >= 0 && __builtin_mul_overflow(n, shape[k], &n))
      lbbb_argerror(L, arg, "sizes", "the sizes multiply past 2^63 elements (size %d is %I)",
                    k + 1, (lua_Integer)shape[k]);
  return n;
}

int lbbb_check_dim(lua_State *L, int arg, const bbb_tensor *t) {
  lua_Integer d0 = lbbb_check_integer(L, arg, "dim"), d = d0;
  if (d < 0) d += t->ndim + 1;
  if (d < 1 || d > t->ndim) {
    char s[96];
    if (t->ndim == 0)
      lbbb_argerror(L, arg, "dim", "a 0-d tensor has no dimension %I", d0);
    lbbb_argerror(L, arg, "dim", "expected 1..%d or -%d..-1 for a %d-d tensor %s, got %I",
                  t->ndim, t->ndim, t->ndim, bbb_shape_str(t, s, sizeof s), d0);
  }
  return (int)d - 1;
}

int lbbb_opt_dim(lua_State *L, int arg, const bbb_tensor *t, int def) {
  return lua_isnoneornil(L, arg) ? def : lbbb_check_dim(L, arg, t);
}
