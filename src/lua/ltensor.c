/*
** ltensor.c: the bbb.Tensor type. Argument checking and userdata live
** here; all arithmetic is in src/core. Indices and dimensions are 1-based
** on this side, 0-based in the core.
*/
#include <math.h>
#include <string.h>

#include "lbbb.h"
#include "autograd.h"
#include "ops.h"
#include "parallel.h"

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

static bbb_tensor *check(lua_State *L, int i) { return lbbb_check_tensor(L, i); }

/* A 1-based dimension argument, negative counting from the end. */
static int check_dim(lua_State *L, int i, const bbb_tensor *t, const char *op) {
  lua_Integer d = luaL_checkinteger(L, i);
  if (d < 0) d += t->ndim + 1;
  if (d < 1 || d > t->ndim) {
    char s[96];
    luaL_error(L, "%s: dimension %d out of range for a %d-d tensor %s", op,
               (int)luaL_checkinteger(L, i), t->ndim, bbb_shape_str(t, s, sizeof s));
  }
  return (int)d - 1;
}

/* ---- creation ---- */

static int t_full_common(lua_State *L, int shape_at, bbb_float v, const char *what) {
  int64_t shape[BBB_MAXDIM];
  int n = lbbb_get_shape(L, shape_at, shape, what);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_full(n, shape, v);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  return 1;
}

static int t_zeros(lua_State *L) { return t_full_common(L, 1, 0, "zeros"); }
static int t_ones(lua_State *L) { return t_full_common(L, 1, 1, "ones"); }
static int t_empty(lua_State *L) { return t_full_common(L, 1, 0, "empty"); }

static int t_full(lua_State *L) {
  /* full(shape, value) with shape a table */
  luaL_checktype(L, 1, LUA_TTABLE);
  return t_full_common(L, 1, (bbb_float)luaL_checknumber(L, 2), "full");
}

static int t_arange(lua_State *L) {
  lua_settop(L, 3);
  lua_Number a = luaL_checknumber(L, 1), b, step = luaL_optnumber(L, 3, 1);
  if (lua_isnoneornil(L, 2)) { b = a; a = 0; } else b = luaL_checknumber(L, 2);
  if (step == 0 || isnan(a) || isnan(b) || isnan(step))
    return luaL_error(L, "arange: step must be non-zero and bounds numbers (got %f, %f, %f)", a, b, step);
  double cnt = ceil((b - a) / step);
  if (cnt < 0) cnt = 0;
  if (cnt > 1e10) return luaL_error(L, "arange: %f elements is too many", cnt);
  int64_t n = (int64_t)cnt;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, &n);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  for (int64_t i = 0; i < n; i++) bbb_data(u->t)[i] = (bbb_float)(a + step * (double)i);
  return 1;
}

static int t_linspace(lua_State *L) {
  lua_Number a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2);
  lua_Integer n = luaL_checkinteger(L, 3);
  if (n < 1) return luaL_error(L, "linspace: needs at least 1 point, got %d", (int)n);
  int64_t sz = n;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, &sz);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  for (int64_t i = 0; i < n; i++)
    bbb_data(u->t)[i] = (bbb_float)(n == 1 ? a : a + (b - a) * (double)i / (double)(n - 1));
  return 1;
}

/* Nested tables: walk once for the shape (checking it is rectangular),
** once for the values. */
static void table_shape(lua_State *L, int i, int depth, int *nd, int64_t *shape) {
  if (depth >= BBB_MAXDIM) luaL_error(L, "tensor: nesting deeper than %d", BBB_MAXDIM);
  int64_t n = (int64_t)luaL_len(L, i);
  shape[depth] = n;
  *nd = depth + 1;
  if (n > 0) {
    lua_geti(L, i, 1);
    if (lua_istable(L, -1)) table_shape(L, lua_gettop(L), depth + 1, nd, shape);
    lua_pop(L, 1);
  }
}

static void table_fill(lua_State *L, int i, int depth, int nd, const int64_t *shape,
                       bbb_float **at) {
  int64_t n = (int64_t)luaL_len(L, i);
  if (n != shape[depth])
    luaL_error(L, "tensor: ragged table: a row at depth %d has %d entries, expected %d",
               depth + 1, (int)n, (int)shape[depth]);
  for (int64_t k = 1; k <= n; k++) {
    lua_geti(L, i, k);
    if (depth + 1 < nd) {
      if (!lua_istable(L, -1))
        luaL_error(L, "tensor: ragged table: expected a table at depth %d, got %s",
                   depth + 2, luaL_typename(L, -1));
      table_fill(L, lua_gettop(L), depth + 1, nd, shape, at);
    } else {
      int ok;
      lua_Number v = lua_tonumberx(L, -1, &ok);
      if (!ok) luaL_error(L, "tensor: entry %d at depth %d is a %s, not a number",
                          (int)k, depth + 1, luaL_typename(L, -1));
      *(*at)++ = (bbb_float)v;
    }
    lua_pop(L, 1);
  }
}

static int t_from_table(lua_State *L) {
  if (lua_type(L, 1) == LUA_TNUMBER) {   /* a 0-d tensor */
    lbbb_tensor_ud *u = lbbb_new_tensor(L);
    u->t = bbb_tensor_full(0, NULL, (bbb_float)lua_tonumber(L, 1));
    lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
    return 1;
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  int nd = 0;
  int64_t shape[BBB_MAXDIM];
  table_shape(L, 1, 0, &nd, shape);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  bbb_float *at = bbb_data(u->t);
  table_fill(L, 1, 0, nd, shape, &at);
  return 1;
}

/* bbb.from_bytes(s, offset, shape, scale): unsigned bytes -> floats * scale
** (image files). offset is 0-based into s. */
static int t_from_bytes(lua_State *L) {
  lua_settop(L, 4);
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  lua_Integer off = luaL_checkinteger(L, 2);
  int64_t shape[BBB_MAXDIM], n = 1;
  luaL_checktype(L, 3, LUA_TTABLE);
  int nd = lbbb_get_shape(L, 3, shape, "from_bytes");
  lua_Number scale = luaL_optnumber(L, 4, 1);
  for (int k = 0; k < nd; k++) n *= shape[k];
  if (off < 0 || (size_t)off > len || (size_t)n > len - (size_t)off)
    return luaL_error(L, "from_bytes: %d bytes at offset %d exceed the %d available",
                      (int)n, (int)off, (int)len);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  bbb_float *d = bbb_data(u->t);
  for (int64_t i = 0; i < n; i++) d[i] = (bbb_float)(s[off + i] * scale);
  return 1;
}

/* ---- random ---- */

static int t_random(lua_State *L, int normal, const char *what) {
  lua_settop(L, 4);
  int64_t shape[BBB_MAXDIM];
  luaL_checktype(L, 1, LUA_TTABLE);
  int nd = lbbb_get_shape(L, 1, shape, what);
  lua_Number a = luaL_optnumber(L, 2, normal ? 0 : 0), b = luaL_optnumber(L, 3, 1);
  if (!isfinite(a) || !isfinite(b) || (normal ? b < 0 : !(a < b)))
    return luaL_error(L, "%s: bad parameters %f, %f (%s)", what, a, b,
                      normal ? "need finite mean and std >= 0" : "need finite lo < hi");
  bbb_rng *g = lbbb_generator_arg(L, 4);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : BBB_EMEM);
  if (normal) bbb_rng_normal(g, bbb_data(u->t), u->t->numel, (bbb_float)a, (bbb_float)b);
  else bbb_rng_uniform(g, bbb_data(u->t), u->t->numel, (bbb_float)a, (bbb_float)b);
  return 1;
}

/* randn(shape [, mean, std [, gen]]) and rand(shape [, lo, hi [, gen]]) */
static int t_randn(lua_State *L) { return t_random(L, 1, "randn"); }
static int t_rand(lua_State *L) { return t_random(L, 0, "rand"); }

/* ---- element access ---- */

static int64_t check_index(lua_State *L, const bbb_tensor *t, lua_Integer i, const char *op) {
  int64_t n = t->ndim ? t->shape[0] : 1;
  if (i < 1 || i > n) {
    char s[96];
    luaL_error(L, "%s: index %d out of range 1..%d for tensor %s", op, (int)i, (int)n,
               bbb_shape_str(t, s, sizeof s));
  }
  return i - 1;
}

/* t[i]: a number for 1-d, else the i-th row as a view. */
static int t_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "grad") == 0) {
      bbb_tensor *t = check(L, 1);
      if (t->grad) lbbb_push_tensor(L, t->grad); else lua_pushnil(L);
      return 1;
    }
    lua_getfield(L, lua_upvalueindex(1), k);
    return 1;
  }
  bbb_tensor *t = check(L, 1);
  if (!lua_isinteger(L, 2)) {
    if (lua_type(L, 2) == LUA_TNUMBER)
      return luaL_error(L, "index: %f is not an integer", lua_tonumber(L, 2));
    return luaL_error(L, "index: expected an integer index or a method name, got %s",
                      luaL_typename(L, 2));
  }
  if (t->ndim == 0) return luaL_error(L, "index: a 0-d tensor has no rows; use item()");
  int64_t i = check_index(L, t, lua_tointeger(L, 2), "index");
  if (t->ndim == 1) { lua_pushnumber(L, bbb_data(t)[i]); return 1; }
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  bbb_tensor *row;
  lbbb_check(L, bbb_narrow(&row, t, 0, i, 1));
  int st = bbb_reshape(&u->t, row, t->ndim - 1, t->shape + 1);
  bbb_tensor_release(row);
  lbbb_check(L, st);
  return 1;
}

static int t_newindex(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (!lua_isinteger(L, 2))
    return luaL_error(L, "index assignment: expected an integer index, got %s",
                      luaL_typename(L, 2));
  if (t->ndim == 0) return luaL_error(L, "index assignment: a 0-d tensor has no rows; use fill()");
  int64_t i = check_index(L, t, lua_tointeger(L, 2), "index assignment");
  int64_t row = t->shape[0] ? t->numel / t->shape[0] : 0;
  bbb_float *d = bbb_data(t) + i * row;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    bbb_float v = (bbb_float)lua_tonumber(L, 3);
    for (int64_t k = 0; k < row; k++) d[k] = v;
  } else {
    if (!luaL_testudata(L, 3, BBB_TENSOR_MT))
      return luaL_error(L, "index assignment: value must be a number or a tensor, got %s",
                        luaL_typename(L, 3));
    bbb_tensor *src = check(L, 3);
    if (src->numel != row) {
      char s[96];
      return luaL_error(L, "index assignment: row %d of %s has %d elements, value %s has %d",
                        (int)i + 1, bbb_shape_str(t, s, sizeof s), (int)row,
                        bbb_shape_str(src, s + 48, 48), (int)src->numel);
    }
    memmove(d, bbb_data(src), (size_t)row * sizeof *d);
  }
  bbb_tensor_touch(t);
  return 0;
}

static int t_get(lua_State *L) {   /* t:get(i, j, ...) -> number */
  bbb_tensor *t = check(L, 1);
  int n = lua_gettop(L) - 1;
  if (n != t->ndim) return luaL_error(L, "get: %d indices for a %d-d tensor", n, t->ndim);
  int64_t off = 0;
  for (int k = 0; k < n; k++) {
    lua_Integer i = luaL_checkinteger(L, k + 2);
    if (i < 1 || i > t->shape[k])
      return luaL_error(L, "get: index %d out of range 1..%d in dimension %d", (int)i,
                        (int)t->shape[k], k + 1);
    off = off * t->shape[k] + (i - 1);
  }
  lua_pushnumber(L, bbb_data(t)[off]);
  return 1;
}

static int t_set(lua_State *L) {   /* t:set(i, j, ..., value) */
  bbb_tensor *t = check(L, 1);
  int n = lua_gettop(L) - 2;
  if (n != t->ndim) return luaL_error(L, "set: %d indices for a %d-d tensor", n, t->ndim);
  int64_t off = 0;
  for (int k = 0; k < n; k++) {
    lua_Integer i = luaL_checkinteger(L, k + 2);
    if (i < 1 || i > t->shape[k])
      return luaL_error(L, "set: index %d out of range 1..%d in dimension %d", (int)i,
                        (int)t->shape[k], k + 1);
    off = off * t->shape[k] + (i - 1);
  }
  bbb_data(t)[off] = (bbb_float)luaL_checknumber(L, n + 2);
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

static int t_item(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  char s[96];
  if (t->numel != 1)
    return luaL_error(L, "item: tensor %s has %d elements, not 1",
                      bbb_shape_str(t, s, sizeof s), (int)t->numel);
  lua_pushnumber(L, bbb_data(t)[0]);
  return 1;
}

static void push_rows(lua_State *L, const bbb_tensor *t, int dim, const bbb_float **at) {
  if (dim >= t->ndim || dim >= BBB_MAXDIM) { lua_pushnumber(L, *(*at)++); return; }
  lua_createtable(L, (int)t->shape[dim], 0);
  for (int64_t k = 0; k < t->shape[dim]; k++) {
    push_rows(L, t, dim + 1, at);
    lua_rawseti(L, -2, k + 1);
  }
}

static int t_totable(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  const bbb_float *at = bbb_data(t);
  luaL_checkstack(L, t->ndim + 4, "totable");
  push_rows(L, t, 0, &at);
  return 1;
}

static int t_size(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->shape[check_dim(L, 2, t, "size")]);
    return 1;
  }
  lua_createtable(L, t->ndim, 0);
  for (int k = 0; k < t->ndim; k++) {
    lua_pushinteger(L, t->shape[k]);
    lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

static int t_dim(lua_State *L) { lua_pushinteger(L, check(L, 1)->ndim); return 1; }
static int t_numel(lua_State *L) { lua_pushinteger(L, check(L, 1)->numel); return 1; }
static int t_len(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 1);
  return 1;
}

/* ---- in-place writes (bump the version the graph checks) ---- */

static int t_fill(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  bbb_float v = (bbb_float)luaL_checknumber(L, 2), *d = bbb_data(t);
  for (int64_t i = 0; i < t->numel; i++) d[i] = v;
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

static int t_copy_(lua_State *L) {
  bbb_tensor *t = check(L, 1), *src = check(L, 2);
  char s1[96], s2[96];
  if (src->numel != t->numel)
    return luaL_error(L, "copy: source %s has %d elements, destination %s has %d",
                      bbb_shape_str(src, s1, sizeof s1), (int)src->numel,
                      bbb_shape_str(t, s2, sizeof s2), (int)t->numel);
  memmove(bbb_data(t), bbb_data(src), (size_t)t->numel * sizeof(bbb_float));
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

/* ---- autograd ---- */

static int t_requires_grad(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (lua_isnone(L, 2)) { lua_pushboolean(L, t->requires_grad); return 1; }
  lbbb_check(L, bbb_requires_grad(t, lua_toboolean(L, 2)));
  lua_settop(L, 1);
  return 1;
}

static int t_backward(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *t = check(L, 1), *seed = lbbb_opt_tensor(L, 2);
  lbbb_check(L, bbb_backward(t, seed, lua_toboolean(L, 3)));
  return 0;
}

static int t_zero_grad(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (t->grad) {
    memset(bbb_data(t->grad), 0, (size_t)t->grad->numel * sizeof(bbb_float));
    bbb_tensor_touch(t->grad);
  }
  lua_settop(L, 1);
  return 1;
}

static int t_set_grad(lua_State *L) {   /* t:set_grad(nil | tensor) */
  lua_settop(L, 2);
  bbb_tensor *t = check(L, 1), *g = lbbb_opt_tensor(L, 2);
  char s1[96], s2[96];
  if (g && !bbb_same_shape(g, t))
    return luaL_error(L, "set_grad: gradient %s does not match tensor %s",
                      bbb_shape_str(g, s1, sizeof s1), bbb_shape_str(t, s2, sizeof s2));
  bbb_tensor *c = NULL;
  if (g && !(c = bbb_tensor_clone(g))) lbbb_check(L, BBB_EMEM);
  bbb_tensor_release(t->grad);
  t->grad = c;
  lua_settop(L, 1);
  return 1;
}

static int t_is_leaf(lua_State *L) { lua_pushboolean(L, check(L, 1)->node == NULL); return 1; }

static int t_grad_fn(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (t->node) lua_pushstring(L, t->node->op); else lua_pushnil(L);
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  lua_pushboolean(L, bbb_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, bbb_grad_enabled());
  return 1;
}

/* ---- ops ---- */

/* The userdata made before the call is on top: raise or return it. */
static int push_result(lua_State *L, int st) {
  lbbb_check(L, st);
  return 1;
}

static int unary_with(lua_State *L, int op, double p0, double p1) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_unary(&u->t, op, x, p0, p1));
}

#define UNARY(name, op) static int t_##name(lua_State *L) { return unary_with(L, op, 0, 0); }
UNARY(neg, BBB_NEG) UNARY(exp, BBB_EXP) UNARY(log, BBB_LOG) UNARY(log1p, BBB_LOG1P)
UNARY(softplus, BBB_SOFTPLUS) UNARY(sigmoid, BBB_SIGMOID) UNARY(tanh, BBB_TANH)
UNARY(relu, BBB_RELU) UNARY(sqrt, BBB_SQRT) UNARY(square, BBB_SQUARE) UNARY(abs, BBB_ABS)
#undef UNARY

static int t_pow(lua_State *L) {
  lua_Number p = luaL_checknumber(L, 2);
  if (!isfinite(p)) return luaL_error(L, "pow: exponent must be finite, got %f", p);
  return unary_with(L, BBB_POWS, p, 0);
}

/* t:gt(s), t:lt(s): 0/1 masks, constant for the gradient */
static int t_gt(lua_State *L) { return unary_with(L, BBB_GTS, luaL_checknumber(L, 2), 0); }
static int t_lt(lua_State *L) { return unary_with(L, BBB_LTS, luaL_checknumber(L, 2), 0); }

static int t_clamp(lua_State *L) {
  lua_settop(L, 3);
  lua_Number lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
  if (isnan(lo) || isnan(hi)) return luaL_error(L, "clamp: bounds must not be NaN");
  return unary_with(L, BBB_CLAMP, lo, hi);
}

/* x op s, or s op x when s_left: the scalar unary ops where there is one,
** else a 0-d tensor broadcast. */
static int scalar_op(bbb_tensor **out, int op, bbb_tensor *x, double s, int s_left) {
  switch (op) {
  case BBB_ADD: return bbb_unary(out, BBB_ADDS, x, s, 0);
  case BBB_MUL: return bbb_unary(out, BBB_MULS, x, s, 0);
  case BBB_SUB: return bbb_unary(out, s_left ? BBB_RSUBS : BBB_ADDS, x, s_left ? s : -s, 0);
  case BBB_DIV: return s_left ? bbb_unary(out, BBB_RDIVS, x, s, 0) : bbb_unary(out, BBB_MULS, x, 1.0 / s, 0);
  }
  bbb_tensor *c = bbb_tensor_full(0, NULL, (bbb_float)s);
  if (!c) return bbb_error(BBB_EMEM, "%s: out of memory", bbb_binary_names[op]);
  int st = s_left ? bbb_binary(out, op, c, x) : bbb_binary(out, op, x, c);
  bbb_tensor_release(c);
  return st;
}

/* a op b where either may be a number. */
static int arith(lua_State *L, int op) {
  int na = lua_type(L, 1) == LUA_TNUMBER, nb = lua_type(L, 2) == LUA_TNUMBER;
  if (na && nb) return luaL_error(L, "%s: needs a tensor operand", bbb_binary_names[op]);
  if (na || nb) {
    bbb_tensor *x = check(L, na ? 2 : 1);
    lua_Number s = lua_tonumber(L, na ? 1 : 2);
    lbbb_tensor_ud *u = lbbb_new_tensor(L);
    return push_result(L, scalar_op(&u->t, op, x, s, na));
  }
  bbb_tensor *a = check(L, 1), *b = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_binary(&u->t, op, a, b));
}

#define BINARY(name, op) static int t_##name(lua_State *L) { return arith(L, op); }
BINARY(add, BBB_ADD) BINARY(sub, BBB_SUB) BINARY(mul, BBB_MUL) BINARY(div, BBB_DIV)
BINARY(maximum, BBB_MAXIMUM) BINARY(minimum, BBB_MINIMUM) BINARY(logaddexp, BBB_LOGADDEXP)
#undef BINARY

static int t_unm(lua_State *L) { return unary_with(L, BBB_NEG, 0, 0); }

/* sum([dim [, keepdim]]) and friends; no dim reduces everything. */
static int reduce(lua_State *L, int op) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lua_isnoneornil(L, 2) ? -1 : check_dim(L, 2, x, bbb_reduce_names[op]);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reduce(&u->t, op, x, dim, lua_toboolean(L, 3)));
}

static int t_sum(lua_State *L) { return reduce(L, BBB_SUM); }
static int t_mean(lua_State *L) { return reduce(L, BBB_MEAN); }
static int t_logsumexp(lua_State *L) { return reduce(L, BBB_LOGSUMEXP); }

static int t_argmax(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lua_isnoneornil(L, 2) ? -1 : check_dim(L, 2, x, "argmax");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_argmax(&u->t, x, dim, lua_toboolean(L, 3), 1));
}

/* max() -> value tensor; max(dim [, keepdim]) -> values, indices */
static int t_max(lua_State *L) {
  lua_settop(L, 3);
  reduce(L, BBB_MAX);
  if (lua_isnoneornil(L, 2)) return 1;
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_argmax(&u->t, x, check_dim(L, 2, x, "max"), lua_toboolean(L, 3), 1));
  return 2;
}

static int t_matmul(lua_State *L) {
  lua_settop(L, 4);
  bbb_tensor *a = check(L, 1), *b = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_matmul(&u->t, a, b, lua_toboolean(L, 3), lua_toboolean(L, 4)));
}

static int t_linear(lua_State *L) {   /* linear(x, W [, b]) */
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1), *w = check(L, 2), *b = lbbb_opt_tensor(L, 3);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_linear(&u->t, x, w, b));
}

static int t_log_softmax(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_log_softmax(&u->t, x));
}

static int t_softmax(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_softmax(&u->t, x));
}

/* nll(logp, labels [, "mean" | "sum"]): labels 1..C */
static int t_nll(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *lp = check(L, 1), *lab = check(L, 2);
  static const char *const modes[] = { "sum", "mean", NULL };
  int mean = luaL_checkoption(L, 3, "mean", modes);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_nll(&u->t, lp, lab, 1, mean));
}

static int t_reshape(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  int64_t shape[BBB_MAXDIM], known = 1;
  int infer = -1, nd = 0;
  /* sizes may include one -1, inferred from the element count */
  if (lua_istable(L, 2)) {
    nd = (int)luaL_len(L, 2);
    if (nd > BBB_MAXDIM) return luaL_error(L, "reshape: at most %d dimensions", BBB_MAXDIM);
    for (int k = 0; k < nd; k++) { lua_geti(L, 2, k + 1); shape[k] = lua_tointeger(L, -1); lua_pop(L, 1); }
  } else {
    while (lua_type(L, 2 + nd) == LUA_TNUMBER) {
      if (nd == BBB_MAXDIM) return luaL_error(L, "reshape: at most %d dimensions", BBB_MAXDIM);
      shape[nd] = lua_tointeger(L, 2 + nd); nd++;
    }
  }
  for (int k = 0; k < nd; k++) {
    if (shape[k] == -1 && infer >= 0) return luaL_error(L, "reshape: only one size may be -1");
    if (shape[k] == -1) infer = k;
    else if (shape[k] < 0) return luaL_error(L, "reshape: size %d is negative (%d)", k + 1, (int)shape[k]);
    else known *= shape[k];
  }
  if (infer >= 0) shape[infer] = known ? x->numel / known : 0;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reshape(&u->t, x, nd, shape));
}

static int t_narrow(lua_State *L) {   /* narrow(dim, start, len), start 1-based */
  lua_settop(L, 4);
  bbb_tensor *x = check(L, 1);
  int dim = check_dim(L, 2, x, "narrow");
  lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_narrow(&u->t, x, dim, start - 1, len));
}

static int t_index_select(lua_State *L) {
  bbb_tensor *x = check(L, 1), *idx = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_index_select(&u->t, x, idx, 1));
}

static int t_transpose(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_transpose(&u->t, x));
}

static int t_clone(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_copy(&u->t, x));
}

static int t_detach(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_detach(&u->t, x));
}

/* cat({t1, t2, ...} [, dim]) */
static int t_cat(lua_State *L) {
  lua_settop(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
  if (n < 1) return luaL_error(L, "cat: needs a non-empty list of tensors");
  bbb_tensor **xs = lua_newuserdatauv(L, (size_t)n * sizeof *xs, 0);   /* GC-owned scratch */
  for (int k = 0; k < n; k++) {
    lua_geti(L, 1, k + 1);
    lbbb_tensor_ud *e = luaL_testudata(L, -1, BBB_TENSOR_MT);
    if (!e || !e->t) return luaL_error(L, "cat: entry %d is a %s, not a tensor", k + 1, luaL_typename(L, -1));
    xs[k] = e->t;
    lua_pop(L, 1);
  }
  int dim = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, xs[0], "cat");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_concat(&u->t, xs, n, dim));
}

/* ---- printing ---- */

static void fmt_value(char *buf, size_t n, double v, int mode) {
  if (mode == 0) snprintf(buf, n, "%.0f", v);
  else if (mode == 1) snprintf(buf, n, "%.4f", v);
  else snprintf(buf, n, "%.4e", v);
}

/* 0: all integers, 1: fixed, 2: scientific. */
static int fmt_mode(const bbb_tensor *t) {
  int ints = 1;
  double mx = 0, mn = HUGE_VAL;
  for (int64_t i = 0; i < t->numel; i++) {
    double v = bbb_data(t)[i], a = fabs(v);
    if (!isfinite(v)) continue;
    if (v != floor(v) || a >= 1e9) ints = 0;
    if (a > mx) mx = a;
    if (a > 0 && a < mn) mn = a;
  }
  if (ints) return 0;
  return (mx >= 1e5 || mn < 1e-4) ? 2 : 1;
}

static void print_matrix(luaL_Buffer *b, const bbb_float *d, int64_t r, int64_t c, int mode, int width) {
  char s[64];
  int summ_r = r > 20, summ_c = c > 12;
  for (int64_t i = 0; i < r; i++) {
    if (summ_r && i == 3) { luaL_addstring(b, " ...\n"); i = r - 4; continue; }
    for (int64_t j = 0; j < c; j++) {
      if (summ_c && j == 4) { luaL_addstring(b, "  ..."); j = c - 5; continue; }
      fmt_value(s, sizeof s, d[i * c + j], mode);
      luaL_addchar(b, ' ');
      for (int pad = width - (int)strlen(s); pad > 0; pad--) luaL_addchar(b, ' ');
      luaL_addstring(b, s);
    }
    luaL_addchar(b, '\n');
  }
}

static int t_tostring(lua_State *L) {
  lbbb_tensor_ud *u = luaL_checkudata(L, 1, BBB_TENSOR_MT);
  if (!u->t) { lua_pushliteral(L, "[bbb.Tensor (closed)]"); return 1; }
  bbb_tensor *t = u->t;
  luaL_Buffer b;
  char s[128];
  int mode = fmt_mode(t), width = 1;
  for (int64_t i = 0; i < t->numel; i++) {
    fmt_value(s, sizeof s, bbb_data(t)[i], mode);
    if ((int)strlen(s) > width) width = (int)strlen(s);
  }
  luaL_buffinit(L, &b);
  if (t->ndim == 0) {
    fmt_value(s, sizeof s, bbb_data(t)[0], mode);
    luaL_addstring(&b, s);
    luaL_addchar(&b, '\n');
  } else if (t->numel > 0) {
    int64_t c = t->shape[t->ndim - 1], r = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    int64_t mats = t->numel / (r * c);
    for (int64_t m = 0; m < mats; m++) {
      if (mats > 6 && m == 3) { luaL_addstring(&b, "...\n\n"); m = mats - 4; continue; }
      if (t->ndim > 2) {   /* Torch's "(i,j,.,.) = " header */
        int64_t rest = m;
        char idx[96] = "";
        for (int d = t->ndim - 3; d >= 0; d--) {
          char part[24];
          snprintf(part, sizeof part, "%lld,%s", (long long)(rest % t->shape[d] + 1), idx);
          snprintf(idx, sizeof idx, "%s", part);
          rest /= t->shape[d];
        }
        snprintf(s, sizeof s, "(%s.,.) = \n", idx);
        luaL_addstring(&b, s);
      }
      if (t->ndim == 1) {   /* a column, as Torch prints vectors */
        print_matrix(&b, bbb_data(t), c, 1, mode, width);
      } else {
        print_matrix(&b, bbb_data(t) + m * r * c, r, c, mode, width);
      }
      if (t->ndim > 2 && m + 1 < mats) luaL_addchar(&b, '\n');
    }
  }
  luaL_addstring(&b, "[bbb.Tensor of size ");
  if (t->ndim == 0) luaL_addstring(&b, "()");
  for (int k = 0; k < t->ndim; k++) {
    snprintf(s, sizeof s, k ? "x%lld" : "%lld", (long long)t->shape[k]);
    luaL_addstring(&b, s);
  }
  if (t->node) { luaL_addstring(&b, ", grad_fn="); luaL_addstring(&b, t->node->op); }
  else if (t->requires_grad) luaL_addstring(&b, ", requires_grad");
  luaL_addchar(&b, ']');
  luaL_pushresult(&b);
  return 1;
}

static int t_gc(lua_State *L) {
  lbbb_tensor_ud *u = luaL_checkudata(L, 1, BBB_TENSOR_MT);
  bbb_tensor_release(u->t);
  u->t = NULL;
  return 0;
}

static int l_is_tensor(lua_State *L) {
  lbbb_tensor_ud *u = luaL_testudata(L, 1, BBB_TENSOR_MT);
  lua_pushboolean(L, u != NULL && u->t != NULL);
  return 1;
}

static int l_set_num_threads(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1 || n > 1024) return luaL_error(L, "set_num_threads: need 1..1024 threads, got %d", (int)n);
  bbb_set_num_threads((int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, bbb_get_num_threads());
  return 1;
}

static int l_bytes_allocated(lua_State *L) {
  lua_pushinteger(L, bbb_bytes_allocated());
  return 1;
}

static const luaL_Reg tensor_methods[] = {
  {"size", t_size}, {"dim", t_dim}, {"numel", t_numel}, {"item", t_item},
  {"totable", t_totable}, {"get", t_get}, {"set", t_set}, {"fill", t_fill},
  {"copy", t_copy_}, {"requires_grad", t_requires_grad}, {"backward", t_backward},
  {"zero_grad", t_zero_grad}, {"set_grad", t_set_grad}, {"is_leaf", t_is_leaf},
  {"grad_fn", t_grad_fn},
  {"neg", t_neg}, {"exp", t_exp}, {"log", t_log}, {"log1p", t_log1p},
  {"softplus", t_softplus}, {"sigmoid", t_sigmoid}, {"tanh", t_tanh}, {"relu", t_relu},
  {"sqrt", t_sqrt}, {"square", t_square}, {"abs", t_abs}, {"pow", t_pow}, {"clamp", t_clamp},
  {"gt", t_gt}, {"lt", t_lt},
  {"add", t_add}, {"sub", t_sub}, {"mul", t_mul}, {"div", t_div},
  {"maximum", t_maximum}, {"minimum", t_minimum}, {"logaddexp", t_logaddexp},
  {"sum", t_sum}, {"mean", t_mean}, {"max", t_max}, {"argmax", t_argmax},
  {"logsumexp", t_logsumexp}, {"matmul", t_matmul}, {"log_softmax", t_log_softmax},
  {"softmax", t_softmax}, {"reshape", t_reshape}, {"view", t_reshape},
  {"narrow", t_narrow}, {"index_select", t_index_select}, {"t", t_transpose},
  {"transpose", t_transpose}, {"clone", t_clone}, {"detach", t_detach},
  {NULL, NULL}
};

static const luaL_Reg tensor_meta[] = {
  {"__newindex", t_newindex}, {"__tostring", t_tostring},
  {"__gc", t_gc}, {"__close", t_gc}, {"__len", t_len}, {"__unm", t_unm},
  {"__add", t_add}, {"__sub", t_sub}, {"__mul", t_mul}, {"__div", t_div},
  {NULL, NULL}
};

static const luaL_Reg module_funcs[] = {
  {"zeros", t_zeros}, {"ones", t_ones}, {"empty", t_empty}, {"full", t_full},
  {"arange", t_arange}, {"linspace", t_linspace}, {"tensor", t_from_table},
  {"from_bytes", t_from_bytes}, {"randn", t_randn}, {"rand", t_rand},
  {"matmul", t_matmul}, {"linear", t_linear}, {"nll", t_nll}, {"cat", t_cat},
  {"is_tensor", l_is_tensor}, {"set_grad_enabled", l_set_grad_enabled},
  {"is_grad_enabled", l_is_grad_enabled}, {"set_num_threads", l_set_num_threads},
  {"get_num_threads", l_get_num_threads}, {"bytes_allocated", l_bytes_allocated},
  {NULL, NULL}
};

void lbbb_open_tensor(lua_State *L) {
  luaL_newmetatable(L, BBB_TENSOR_MT);
  luaL_setfuncs(L, tensor_meta, 0);
  luaL_newlib(L, tensor_methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, "Tensor");      /* bbb.core.Tensor: the methods, open to extension */
  lua_pushcclosure(L, t_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_setfuncs(L, module_funcs, 0);
  /* the elementwise ops as functions too: bbb.core.exp(t) */
  luaL_setfuncs(L, tensor_methods, 0);
}
