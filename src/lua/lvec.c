/*
** lvec.c: bbb.Vec, a flat vector of doubles, the state of bbb.mcmc's
** sampler (position, momentum, gradient, velocity). The tensors stay
** float32; the sampler keeps its own arithmetic in double so that the
** energy error it accepts on carries no float32 rounding. Its loops live
** here because each is one line: a vector of 1,000 numbers in a Lua table
** cost the sampler more per leapfrog step than the gradient it takes.
*/
#include <math.h>

#include "lua/lbbb.h"

#define BBB_VEC_MT "bbb.Vec"
/* Longer than any net whose gradient fits in memory several times over. */
#define VEC_MAX ((lua_Integer)1 << 31)

typedef struct { int64_t n; double v[]; } vec;

static vec *check_vec(lua_State *L, int i, const char *name) {
  vec *x = luaL_testudata(L, i, BBB_VEC_MT);
  if (!x) lbbb_typeerror(L, i, name, "a bbb.Vec");
  return x;
}

static vec *new_vec(lua_State *L, int64_t n) {
  vec *x = lua_newuserdatauv(L, sizeof(vec) + sizeof(double) * (size_t)n, 0);
  x->n = n;
  for (int64_t i = 0; i < n; i++) x->v[i] = 0;
  luaL_setmetatable(L, BBB_VEC_MT);
  return x;
}

/* The count of an operation on a and b (b at argument barg): n at arg
** (at most both lengths) or, when nil, their common length. */
static int64_t span(lua_State *L, const vec *a, const vec *b, int barg, int arg) {
  if (!lua_isnoneornil(L, arg)) {
    int64_t most = a->n < b->n ? a->n : b->n;
    return (int64_t)lbbb_check_int_range(L, arg, "n", 0, most);
  }
  if (a->n != b->n)
    lbbb_argerror(L, barg, "x", "has %I numbers where v has %I", (lua_Integer)b->n, (lua_Integer)a->n);
  return a->n;
}

/** vec(n | list | tensor) -> Vec
** A vector of doubles: n zeros, the numbers of a Lua list, or a tensor's
** elements (in row-major order). Methods change it in place and return
** it: v:axpy(a, x [, n]) adds a x (the first n numbers only, with n),
** v:mul(x) multiplies elementwise; v:dot(x [, n]), v:max_abs(),
** v:clone(), v:totable(), v:tensor() (1-d float32); #v, v[i], v[i] = x.
** @usage
**   local v = bbb.core.vec { 1, 2, 3 }
**   v:axpy(2, bbb.core.vec { 1, 1, 1 })
**   assert(v[3] == 5 and v:dot(v) == 3 * 3 + 4 * 4 + 5 * 5) */
static int l_vec(lua_State *L) {
  lua_settop(L, 1);
  if (lua_type(L, 1) == LUA_TNUMBER) {
    new_vec(L, (int64_t)lbbb_check_int_range(L, 1, "n", 0, VEC_MAX));
    return 1;
  }
  if (lbbb_is_tensor(L, 1)) {
    bbb_tensor *t = lbbb_check_tensor(L, 1, "x");
    vec *x = new_vec(L, t->numel);
    const bbb_float *d = bbb_data(t);
    for (int64_t i = 0; i < t->numel; i++) x->v[i] = d[i];
    return 1;
  }
  if (!lua_istable(L, 1)) return lbbb_typeerror(L, 1, "x", "a count, a list of numbers or a tensor");
  lua_Integer n = luaL_len(L, 1);
  if (n < 0 || n > VEC_MAX) return lbbb_argerror(L, 1, "x", "holds %I numbers", n);
  vec *x = new_vec(L, n);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, 1, i) != LUA_TNUMBER) return lbbb_argerror(L, 1, "x", "[%I] is not a number", i);
    x->v[i - 1] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  return 1;
}

static int v_clone(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  vec *c = new_vec(L, a->n);
  for (int64_t i = 0; i < a->n; i++) c->v[i] = a->v[i];
  return 1;
}

static int v_axpy(lua_State *L) {
  vec *y = check_vec(L, 1, "v");
  lua_Number a = lbbb_check_number(L, 2, "a");
  vec *x = check_vec(L, 3, "x");
  int64_t n = span(L, y, x, 3, 4);
  for (int64_t i = 0; i < n; i++) y->v[i] += a * x->v[i];
  lua_settop(L, 1);
  return 1;
}

static int v_mul(lua_State *L) {
  vec *y = check_vec(L, 1, "v"), *x = check_vec(L, 2, "x");
  int64_t n = span(L, y, x, 2, 3);
  for (int64_t i = 0; i < n; i++) y->v[i] *= x->v[i];
  lua_settop(L, 1);
  return 1;
}

static int v_dot(lua_State *L) {
  vec *a = check_vec(L, 1, "v"), *b = check_vec(L, 2, "x");
  int64_t n = span(L, a, b, 2, 3);
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a->v[i] * b->v[i];
  lua_pushnumber(L, s);
  return 1;
}

/* The largest |v[i]|, NaN when any is NaN: a position that ran away or
** turned undefined fails `max_abs() < bound` either way. */
static int v_max_abs(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  double m = 0;
  for (int64_t i = 0; i < a->n; i++) {
    double x = fabs(a->v[i]);
    if (x != x) { m = x; break; }
    if (x > m) m = x;
  }
  lua_pushnumber(L, m);
  return 1;
}

static int v_totable(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  lua_createtable(L, (int)a->n, 0);
  for (int64_t i = 0; i < a->n; i++) {
    lua_pushnumber(L, a->v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int v_tensor(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  int64_t n = a->n;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, &n);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  for (int64_t i = 0; i < n; i++) bbb_data(u->t)[i] = (bbb_float)a->v[i];
  return 1;
}

static int v_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_vec(L, 1, "v")->n);
  return 1;
}

/* v[i] reads a number (nil past the end, as a list does); v.name a method. */
static int v_index(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_Integer i = lbbb_check_integer(L, 2, "i");
    if (i >= 1 && i <= a->n) lua_pushnumber(L, a->v[i - 1]);
    else lua_pushnil(L);
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(2));
  return 1;
}

static int v_newindex(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  lua_Integer i = lbbb_check_int_range(L, 2, "i", 1, a->n > 0 ? a->n : 1);
  if (a->n == 0) return lbbb_argerror(L, 2, "i", "the vector is empty");
  a->v[i - 1] = lbbb_check_number(L, 3, "x");
  return 0;
}

static int v_tostring(lua_State *L) {
  vec *a = check_vec(L, 1, "v");
  lua_pushfstring(L, "bbb.Vec of %I doubles", (lua_Integer)a->n);
  return 1;
}

static int l_is_vec(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, BBB_VEC_MT) != NULL);
  return 1;
}

static const luaL_Reg methods[] = {
  {"clone", v_clone}, {"axpy", v_axpy}, {"mul", v_mul}, {"dot", v_dot}, {"max_abs", v_max_abs},
  {"totable", v_totable}, {"tensor", v_tensor}, {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"vec", l_vec}, {"is_vec", l_is_vec}, {NULL, NULL}
};

/* A metamethod named "bbb.Vec.name" for its errors, with the nup values
** on top of the stack as its further upvalues. */
static void set_meta(lua_State *L, int meta, lua_CFunction f, const char *name, const char *full, int nup) {
  lbbb_pushfunction(L, f, full, nup);
  lua_setfield(L, meta, name);
}

void lbbb_open_vec(lua_State *L, const lbbb_tables *tb) {
  luaL_newmetatable(L, BBB_VEC_MT);
  int meta = lua_gettop(L);
  lua_newtable(L);
  for (const luaL_Reg *r = methods; r->name; r++) {
    lua_pushfstring(L, "bbb.Vec.%s", r->name);
    lbbb_pushfunction(L, r->func, lua_tostring(L, -1), 0);
    lua_remove(L, -2);
    lua_setfield(L, -2, r->name);
  }
  set_meta(L, meta, v_index, "__index", "bbb.Vec.__index", 1);   /* the methods table its upvalue */
  set_meta(L, meta, v_newindex, "__newindex", "bbb.Vec.__newindex", 0);
  set_meta(L, meta, v_len, "__len", "bbb.Vec.__len", 0);
  set_meta(L, meta, v_tostring, "__tostring", "bbb.Vec.__tostring", 0);
  lua_pop(L, 1);
  lbbb_register_internal(L, tb, funcs);
}
