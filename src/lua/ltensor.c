/*
** ltensor.c: the bbb.Tensor type (src/engine/tensor.c): creation, element
** access, in-place writes, the finaliser. Indices and dimensions are 1-based
** on this side, 0-based in the core.
*/
#include <math.h>
#include <string.h>

#include "lua/lbbb.h"
#include "engine/autograd.h"
#include "engine/ops.h"

static bbb_tensor *check(lua_State *L, int i) { return lbbb_check_tensor(L, i, "x"); }

/* ---- creation ---- */

/* Sizes at 1..last (or one table at 1), then nothing else. */
static int t_full_common(lua_State *L, int last, bbb_float v) {
  int64_t shape[BBB_MAXDIM];
  if (lua_gettop(L) >= 1 && lua_isnil(L, 1))
    return lbbb_typeerror(L, 1, "sizes", "integer sizes or a table of them");
  int n = lbbb_check_sizes(L, 1, last, shape, 0);
  if (lua_istable(L, 1) && last > 1)
    return lbbb_argerror(L, 2, "value", "nothing may follow a table of sizes, got %s",
                         luaL_typename(L, 2));
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_full(n, shape, v);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  return 1;
}

/** zeros(n1, n2, ...) -> tensor
** zeros({n1, n2, ...}) -> tensor
** A float32 tensor of the given sizes filled with 0. Sizes are integers >= 0,
** given as numbers or as one table (x:size() works); no sizes make a 0-d tensor.
** @usage
**   local z = bbb.zeros(2, 3)
**   assert(z:numel() == 6 and bbb.zeros(z:size()):dim() == 2) */
static int t_zeros(lua_State *L) { return t_full_common(L, lua_gettop(L), 0); }
/** ones(n1, n2, ...) -> tensor
** ones({n1, n2, ...}) -> tensor
** A float32 tensor of the given sizes filled with 1. */
static int t_ones(lua_State *L) { return t_full_common(L, lua_gettop(L), 1); }
/** empty(n1, n2, ...) -> tensor
** empty({n1, n2, ...}) -> tensor
** A tensor of the given sizes (filled with 0: bbb never hands out garbage). */
static int t_empty(lua_State *L) { return t_full_common(L, lua_gettop(L), 0); }

/** full(n1, n2, ..., value) -> tensor
** full({n1, n2, ...}, value) -> tensor
** A tensor of the given sizes with every element equal to value. */
static int t_full(lua_State *L) {
  int top = lua_gettop(L);
  if (lua_istable(L, 1)) {
    if (top > 2) return lbbb_argerror(L, 3, "value", "nothing may follow the value, got %s",
                                      luaL_typename(L, 3));
    bbb_float v = lbbb_check_float(L, 2, "value");
    lua_settop(L, 1);
    return t_full_common(L, 1, v);
  }
  if (top < 2) return lbbb_typeerror(L, top + 1, "value", "sizes then a value, as full(2, 3, 7) or full({2, 3}, 7), so a number");
  bbb_float v = lbbb_check_float(L, top, "value");
  lua_settop(L, top - 1);
  return t_full_common(L, top - 1, v);
}

/** arange([start,] stop [, step]) -> tensor
** The 1-d tensor start, start + step, ... up to but not including stop
** (start 0 and step 1 by default), as NumPy's arange.
** @usage
**   assert(bbb.arange(5):sum():item() == 10)   -- 0 + 1 + 2 + 3 + 4 */
static int t_arange(lua_State *L) {
  lua_settop(L, 3);
  lua_Number a = lbbb_check_finite(L, 1, "start"), b, step = lbbb_opt_finite(L, 3, "step", 1);
  if (lua_isnoneornil(L, 2)) { b = a; a = 0; } else b = lbbb_check_finite(L, 2, "stop");
  if (step == 0) return lbbb_argerror(L, 3, "step", "expected a non-zero number, got 0");
  double cnt = ceil((b - a) / step);
  if (cnt < 0) cnt = 0;
  if (cnt > 1e10)
    return lbbb_argerror(L, 3, "step", "%f elements from %f to %f are too many", cnt, a, b);
  int64_t n = (int64_t)cnt;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, &n);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  for (int64_t i = 0; i < n; i++) bbb_data(u->t)[i] = (bbb_float)(a + step * (double)i);
  return 1;
}

/** linspace(a, b, n) -> tensor
** n evenly spaced points from a to b, both included. */
static int t_linspace(lua_State *L) {
  lua_Number a = lbbb_check_finite(L, 1, "a"), b = lbbb_check_finite(L, 2, "b");
  lua_Integer n = lbbb_check_int_range(L, 3, "n", 1, (lua_Integer)1 << 40);
  int64_t sz = n;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, &sz);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  for (int64_t i = 0; i < n; i++)
    bbb_data(u->t)[i] = (bbb_float)(n == 1 ? a : a + (b - a) * (double)i / (double)(n - 1));
  return 1;
}

/* Nested tables: walk once for the shape (checking it is rectangular),
** once for the values. */
static void table_shape(lua_State *L, int i, int depth, int *nd, int64_t *shape) {
  if (depth >= BBB_MAXDIM)
    lbbb_argerror(L, 1, "data", "tables nest deeper than %d levels", BBB_MAXDIM);
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
    lbbb_argerror(L, 1, "data", "ragged table: a row at depth %d has %d entries, expected %d",
                  depth + 1, (int)n, (int)shape[depth]);
  for (int64_t k = 1; k <= n; k++) {
    lua_geti(L, i, k);
    if (depth + 1 < nd) {
      if (!lua_istable(L, -1))
        lbbb_argerror(L, 1, "data", "ragged table: expected a table at depth %d, got %s",
                      depth + 2, luaL_typename(L, -1));
      table_fill(L, lua_gettop(L), depth + 1, nd, shape, at);
    } else {
      if (lua_type(L, -1) != LUA_TNUMBER)
        lbbb_argerror(L, 1, "data", "entry %d at depth %d is a %s, not a number",
                      (int)k, depth + 1, luaL_typename(L, -1));
      lua_Number v = lua_tonumber(L, -1);
      if (!lbbb_float_fits(v))
        lbbb_argerror(L, 1, "data", "entry %d at depth %d (%f) overflows float32",
                      (int)k, depth + 1, v);
      *(*at)++ = (bbb_float)v;
    }
    lua_pop(L, 1);
  }
}

/** tensor(table) -> tensor
** tensor(number) -> tensor
** A tensor from nested tables of numbers ({{1, 2}, {3, 4}} is 2x2; rows must
** have equal lengths), or a 0-d tensor from a number.
** @usage
**   local x = bbb.tensor{ { 1, 2 }, { 3, 4 } }
**   assert(x:size(1) == 2 and x:get(2, 1) == 3) */
static int t_from_table(lua_State *L) {
  if (lua_type(L, 1) == LUA_TNUMBER) {   /* a 0-d tensor */
    bbb_float v = lbbb_check_float(L, 1, "data");
    lbbb_tensor_ud *u = lbbb_new_tensor(L);
    u->t = bbb_tensor_full(0, NULL, v);
    lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
    return 1;
  }
  if (!lua_istable(L, 1)) return lbbb_typeerror(L, 1, "data", "a table of numbers or a number");
  int nd = 0;
  int64_t shape[BBB_MAXDIM];
  table_shape(L, 1, 0, &nd, shape);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  bbb_float *at = bbb_data(u->t);
  table_fill(L, 1, 0, nd, shape, &at);
  return 1;
}

/** from_bytes(s, offset, {n1, ...} [, scale]) -> tensor
** The unsigned bytes of string s from 0-based offset, as floats times scale
** (image files). The sizes must fit in the bytes available. */
static int t_from_bytes(lua_State *L) {
  lua_settop(L, 4);
  size_t len;
  if (lua_type(L, 1) != LUA_TSTRING) return lbbb_typeerror(L, 1, "s", "a string");
  const unsigned char *s = (const unsigned char *)lua_tolstring(L, 1, &len);
  lua_Integer off = lbbb_check_int_range(L, 2, "offset", 0, (lua_Integer)len);
  int64_t shape[BBB_MAXDIM];
  lbbb_check_table(L, 3, "sizes");
  int nd = lbbb_check_sizes(L, 3, 3, shape, 0);
  lua_Number scale = lbbb_opt_finite(L, 4, "scale", 1);
  if (!lbbb_float_fits(255 * scale))
    return lbbb_argerror(L, 4, "scale", "255 * %f overflows float32", scale);
  int64_t n = lbbb_sizes_numel(L, 3, nd, shape);
  if ((uint64_t)n > (uint64_t)(len - (size_t)off))
    return lbbb_argerror(L, 3, "sizes", "%I bytes at offset %I exceed the %I available",
                         (lua_Integer)n, off, (lua_Integer)len);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  bbb_float *d = bbb_data(u->t);
  for (int64_t i = 0; i < n; i++) d[i] = (bbb_float)(s[off + i] * scale);
  return 1;
}
/* A size is a plain list of integers that prints as a size. */
static void push_size(lua_State *L, const bbb_tensor *t) {
  lua_createtable(L, t->ndim, 0);
  for (int k = 0; k < t->ndim; k++) {
    lua_pushinteger(L, t->shape[k]);
    lua_rawseti(L, -2, k + 1);
  }
  luaL_setmetatable(L, BBB_SIZE_MT);
}

static int size_tostring(lua_State *L) {
  luaL_Buffer b;
  lbbb_check_table(L, 1, "size");
  lua_Integer n = luaL_len(L, 1);
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "bbb.Size{");
  for (lua_Integer k = 1; k <= n; k++) {
    lua_geti(L, 1, k);
    if (k > 1) luaL_addstring(&b, ", ");
    luaL_tolstring(L, -1, NULL);
    luaL_addvalue(&b);
    lua_pop(L, 1);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

/* ---- element access ---- */

/* The row index at arg of t[i] (t has at least 1 dimension), 0-based. */
static int64_t check_row(lua_State *L, const bbb_tensor *t, int arg) {
  lua_Integer i = lbbb_check_integer(L, arg, "index");
  if (i < 1 || i > t->shape[0]) {
    char s[96];
    lbbb_argerror(L, arg, "index", "expected 1..%I for a tensor %s, got %I",
                  (lua_Integer)t->shape[0], bbb_shape_str(t, s, sizeof s), i);
  }
  return i - 1;
}

/* t[i]: a number for 1-d, else the i-th row as a view. */
static int t_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "grad") == 0) {
      bbb_tensor *g = bbb_tensor_grad(check(L, 1));
      if (g) lbbb_push_tensor(L, g); else lua_pushnil(L);
      return 1;
    }
    if (strcmp(k, "shape") == 0) {   /* x.shape, as in PyTorch */
      push_size(L, check(L, 1));
      return 1;
    }
    lua_getfield(L, lua_upvalueindex(2), k);   /* the methods table */
    return 1;
  }
  bbb_tensor *t = check(L, 1);
  if (lua_type(L, 2) != LUA_TNUMBER)
    return lbbb_typeerror(L, 2, "index", "an integer index or a method name");
  if (t->ndim == 0) return lbbb_argerror(L, 2, "index", "a 0-d tensor has no rows; use item()");
  int64_t i = check_row(L, t, 2);
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
  if (t->ndim == 0) return lbbb_argerror(L, 2, "index", "a 0-d tensor has no rows; use fill()");
  int64_t i = check_row(L, t, 2);
  int64_t row = t->shape[0] ? t->numel / t->shape[0] : 0;
  bbb_float *d = bbb_data(t) + i * row;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    bbb_float v = lbbb_check_float(L, 3, "value");
    for (int64_t k = 0; k < row; k++) d[k] = v;
  } else {
    if (!luaL_testudata(L, 3, BBB_TENSOR_MT))
      return lbbb_typeerror(L, 3, "value", "a number or a tensor");
    bbb_tensor *src = lbbb_check_tensor(L, 3, "value");
    if (src->numel != row) {
      char s[96];
      return lbbb_argerror(L, 3, "value", "row %d of %s has %d elements, the value %s has %d",
                           (int)i + 1, bbb_shape_str(t, s, sizeof s), (int)row,
                           bbb_shape_str(src, s + 48, 48), (int)src->numel);
    }
    memmove(d, bbb_data(src), (size_t)row * sizeof *d);
  }
  bbb_tensor_touch(t);
  return 0;
}

/* The offset of the element at the n indices from argument 2 on, one per
** dimension of t. */
static int64_t element_offset(lua_State *L, const bbb_tensor *t, int n) {
  if (n != t->ndim) {
    char s[96];
    lbbb_argerror(L, 2, "indices", "a %d-d tensor %s takes %d indices, got %d", t->ndim,
                  bbb_shape_str(t, s, sizeof s), t->ndim, n < 0 ? 0 : n);
  }
  int64_t off = 0;
  for (int k = 0; k < n; k++) {
    lua_Integer i = lbbb_check_integer(L, k + 2, "index");
    if (i < 1 || i > t->shape[k])
      lbbb_argerror(L, k + 2, "index", "expected 1..%I in dimension %d, got %I",
                    (lua_Integer)t->shape[k], k + 1, i);
    off = off * t->shape[k] + (i - 1);
  }
  return off;
}

/** get(x, i, j, ...) -> number
** The element at 1-based indices (one per dimension). */
static int t_get(lua_State *L) {   /* t:get(i, j, ...) -> number */
  bbb_tensor *t = check(L, 1);
  lua_pushnumber(L, bbb_data(t)[element_offset(L, t, lua_gettop(L) - 1)]);
  return 1;
}

/** set(x, i, j, ..., value) -> x
** Writes one element in place (1-based indices). */
static int t_set(lua_State *L) {   /* t:set(i, j, ..., value) */
  bbb_tensor *t = check(L, 1);
  int n = lua_gettop(L) - 2;
  int64_t off = element_offset(L, t, n);
  bbb_data(t)[off] = lbbb_check_float(L, n + 2, "value");
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

/** item(x) -> number
** The value of a one-element tensor. */
static int t_item(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  char s[96];
  if (t->numel != 1)
    return lbbb_argerror(L, 1, "x", "expected one element, the tensor %s has %I",
                         bbb_shape_str(t, s, sizeof s), (lua_Integer)t->numel);
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

/** totable(x) -> table
** The elements as nested Lua tables (a number for a 0-d tensor). */
static int t_totable(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  const bbb_float *at = bbb_data(t);
  luaL_checkstack(L, t->ndim + 4, "totable");
  push_rows(L, t, 0, &at);
  return 1;
}

/** size(x [, dim]) -> bbb.Size | integer
** The sizes as a bbb.Size (a list of integers that prints as a size), or the
** size of one dimension (1-based, negative counts from the end). x.shape is
** the same as x:size().
** @usage
**   local x = bbb.zeros(4, 5)
**   assert(x:size(2) == 5 and x:size(-1) == 5 and #x.shape == 2) */
static int t_size(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->shape[lbbb_check_dim(L, 2, t)]);
    return 1;
  }
  push_size(L, t);
  return 1;
}

/** dim(x) -> integer
** The number of dimensions. */
static int t_dim(lua_State *L) { lua_pushinteger(L, check(L, 1)->ndim); return 1; }
/** numel(x) -> integer
** The number of elements. */
static int t_numel(lua_State *L) { lua_pushinteger(L, check(L, 1)->numel); return 1; }
static int t_len(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 1);
  return 1;
}

/* ---- in-place writes (bump the version the graph checks) ---- */

/** fill(x, value) -> x
** Sets every element to value, in place. */
static int t_fill(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  bbb_float v = lbbb_check_float(L, 2, "value"), *d = bbb_data(t);
  for (int64_t i = 0; i < t->numel; i++) d[i] = v;
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

/** copy(x, src) -> x
** Copies src's elements into x in place (same element count). */
static int t_copy_(lua_State *L) {
  bbb_tensor *t = check(L, 1), *src = lbbb_check_tensor(L, 2, "src");
  char s1[96], s2[96];
  if (src->numel != t->numel)
    return lbbb_argerror(L, 2, "src", "%s has %I elements, the destination %s has %I",
                         bbb_shape_str(src, s1, sizeof s1), (lua_Integer)src->numel,
                         bbb_shape_str(t, s2, sizeof s2), (lua_Integer)t->numel);
  memmove(bbb_data(t), bbb_data(src), (size_t)t->numel * sizeof(bbb_float));
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}
static int t_gc(lua_State *L) {
  lbbb_tensor_ud *u = luaL_testudata(L, 1, BBB_TENSOR_MT);
  if (!u) return lbbb_typeerror(L, 1, "x", "a tensor");
  bbb_tensor_release(u->t);
  u->t = NULL;
  return 0;
}

/** is_tensor(v) -> boolean
** True when v is an open bbb tensor. */
static int l_is_tensor(lua_State *L) {
  lbbb_tensor_ud *u = luaL_testudata(L, 1, BBB_TENSOR_MT);
  lua_pushboolean(L, u != NULL && u->t != NULL);
  return 1;
}


static const luaL_Reg methods[] = {
  {"size", t_size}, {"dim", t_dim}, {"numel", t_numel}, {"item", t_item},
  {"totable", t_totable}, {"get", t_get}, {"set", t_set}, {"fill", t_fill},
  {"copy", t_copy_}, {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"zeros", t_zeros}, {"ones", t_ones}, {"empty", t_empty}, {"full", t_full},
  {"arange", t_arange}, {"linspace", t_linspace}, {"tensor", t_from_table},
  {"from_bytes", t_from_bytes}, {"is_tensor", l_is_tensor}, {NULL, NULL}
};

static const luaL_Reg meta[] = {
  {"__newindex", t_newindex}, {"__gc", t_gc}, {"__close", t_gc}, {"__len", t_len},
  {NULL, NULL}
};

void lbbb_open_tensor(lua_State *L, const lbbb_tables *tb) {
  luaL_newmetatable(L, BBB_SIZE_MT);
  lbbb_pushfunction(L, size_tostring, "bbb.Size.__tostring", 0);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lbbb_register(L, tb, methods, funcs, meta);
  lua_pushvalue(L, tb->methods);
  lbbb_pushfunction(L, t_index, "bbb.Tensor.__index", 1);
  lua_setfield(L, tb->meta, "__index");
}
