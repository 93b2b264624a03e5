/*
** lrng.c: bbb.Generator, explicit random generators (src/engine/rng.c), the
** module's default one (bbb.manual_seed), and random tensors.
*/
#include <math.h>

#include "lua/lbbb.h"
#include "engine/ops.h"

static const char *DEFAULT_KEY = "bbb.default_generator";

bbb_rng *lbbb_check_generator(lua_State *L, int i, const char *name) {
  bbb_rng *g = luaL_testudata(L, i, BBB_GENERATOR_MT);
  if (!g) lbbb_typeerror(L, i, name, "a bbb.Generator");
  return g;
}

bbb_rng *lbbb_generator_arg(lua_State *L, int i) {
  if (!lua_isnoneornil(L, i)) return lbbb_check_generator(L, i, "gen");
  lua_getfield(L, LUA_REGISTRYINDEX, DEFAULT_KEY);
  bbb_rng *g = lua_touserdata(L, -1);
  lua_pop(L, 1);   /* the registry keeps it alive */
  return g;
}

/* A seed is an integer (or an integral float); NaN, inf and fractions are
** refused rather than silently truncated. */
static uint64_t check_seed(lua_State *L, int i) {
  return (uint64_t)lbbb_check_integer(L, i, "seed");
}

/** Generator([seed]) -> generator
** A Philox4x32-10 random generator: counter based, so its numbers do not
** depend on the thread count. g:seed(), g:state(), g:set_state(seed, counter). */
static int l_generator(lua_State *L) {
  uint64_t seed = lua_isnoneornil(L, 1) ? 0 : check_seed(L, 1);
  bbb_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
  bbb_rng_init(g, seed);
  luaL_setmetatable(L, BBB_GENERATOR_MT);
  return 1;
}

/** manual_seed(seed [, gen])
** Reseeds the default generator (or gen) with an integer seed.
** @usage
**   bbb.manual_seed(1)
**   local a = bbb.rand(2):get(1)
**   bbb.manual_seed(1)
**   assert(bbb.rand(2):get(1) == a) */
static int l_manual_seed(lua_State *L) {
  bbb_rng_init(lbbb_generator_arg(L, 2), check_seed(L, 1));
  return 0;
}

static int g_seed(lua_State *L) {
  bbb_rng *g = lbbb_check_generator(L, 1, "g");
  if (lua_isnoneornil(L, 2)) { lua_pushinteger(L, (lua_Integer)g->seed); return 1; }
  bbb_rng_init(g, check_seed(L, 2));
  lua_settop(L, 1);
  return 1;
}

/* state() -> seed, counter; set_state(seed, counter): for checkpoints */
static int g_state(lua_State *L) {
  bbb_rng *g = lbbb_check_generator(L, 1, "g");
  lua_pushinteger(L, (lua_Integer)g->seed);
  lua_pushinteger(L, (lua_Integer)g->counter);
  return 2;
}

static int g_set_state(lua_State *L) {
  bbb_rng *g = lbbb_check_generator(L, 1, "g");
  g->seed = check_seed(L, 2);
  g->counter = (uint64_t)lbbb_check_integer(L, 3, "counter");
  lua_settop(L, 1);
  return 1;
}

static int g_tostring(lua_State *L) {
  bbb_rng *g = lbbb_check_generator(L, 1, "g");
  lua_pushfstring(L, "bbb.Generator(seed=%I, counter=%I)", (lua_Integer)g->seed,
                  (lua_Integer)g->counter);
  return 1;
}

/* ---- random ---- */

/* Sizes as a table, then the parameters: randn({2, 3}, mean, std, gen); or
** sizes as numbers, then at most a generator: randn(2, 3 [, gen]). */
static int t_random(lua_State *L, int normal) {
  int64_t shape[BBB_MAXDIM];
  int nd;
  if (lua_type(L, 1) == LUA_TNUMBER) {
    int last = 1, top = lua_gettop(L);
    while (last < top && lua_type(L, last + 1) == LUA_TNUMBER) last++;
    if (last < top && !lua_isnil(L, last + 1) && !luaL_testudata(L, last + 1, BBB_GENERATOR_MT))
      return lbbb_typeerror(L, last + 1, "gen", "a bbb.Generator (after sizes given as numbers "
                            "only a Generator may follow: give the sizes as a table to pass "
                            "parameters)");
    nd = lbbb_check_sizes(L, 1, last, shape, 0);
    lua_settop(L, nd + 1);
    lua_insert(L, 1);   /* the generator (or nil) first ... */
    lua_settop(L, 1);
    lua_createtable(L, 0, 0);   /* ... then placeholders: shape, a, b, gen */
    lua_insert(L, 1);
    lua_pushnil(L);
    lua_insert(L, 2);
    lua_pushnil(L);
    lua_insert(L, 3);
  } else {
    if (!lua_istable(L, 1)) return lbbb_typeerror(L, 1, "sizes", "integer sizes or a table of them");
    nd = lbbb_check_sizes(L, 1, 1, shape, 0);
  }
  lua_settop(L, 4);
  lua_Number a = lbbb_opt_finite(L, 2, normal ? "mean" : "lo", 0);
  lua_Number b = lbbb_opt_finite(L, 3, normal ? "std" : "hi", 1);
  if (normal && b < 0) return lbbb_argerror(L, 3, "std", "expected a number >= 0, got %f", b);
  if (!normal && !(a < b)) return lbbb_argerror(L, 3, "hi", "expected a number > lo (%f), got %f", a, b);
  if (!lbbb_float_fits(a) || !lbbb_float_fits(b) || !lbbb_float_fits(a + 8 * b))
    return lbbb_argerror(L, 2, normal ? "mean" : "lo", "%f and %f overflow float32", a, b);
  bbb_rng *g = lbbb_generator_arg(L, 4);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  if (normal) bbb_rng_normal(g, bbb_data(u->t), u->t->numel, (bbb_float)a, (bbb_float)b);
  else bbb_rng_uniform(g, bbb_data(u->t), u->t->numel, (bbb_float)a, (bbb_float)b);
  return 1;
}

/** randn(n1, n2, ... [, gen]) -> tensor
** randn({n1, n2, ...} [, mean, std [, gen]]) -> tensor
** Samples from the normal distribution N(mean, std^2) (0 and 1 by default),
** from generator gen or the default one (see manual_seed). The same seed gives
** the same numbers for any thread count.
** @usage
**   local g = bbb.Generator(7)
**   local a = bbb.randn({ 3 }, 0, 1, g)
**   g:seed(7)
**   assert(bbb.randn({ 3 }, 0, 1, g):get(1) == a:get(1))   -- same seed, same numbers */
static int t_randn(lua_State *L) { return t_random(L, 1); }
/** rand(n1, n2, ... [, gen]) -> tensor
** rand({n1, n2, ...} [, lo, hi [, gen]]) -> tensor
** Samples uniformly from [lo, hi) ([0, 1) by default). */
static int t_rand(lua_State *L) { return t_random(L, 0); }

/** dropout_mask(sizes, p [, gen]) -> tensor
** The mask of inverted dropout: 1 / (1 - p) with probability 1 - p, else 0
** (p in [0, 1)). The same numbers as rand(sizes, 0, 1, gen):gt(p) * (1 / (1 - p)),
** made in one tensor and two passes instead of three tensors. */
static int t_dropout_mask(lua_State *L) {
  int64_t shape[BBB_MAXDIM];
  if (!lua_istable(L, 1)) return lbbb_typeerror(L, 1, "sizes", "a table of integer sizes");
  int nd = lbbb_check_sizes(L, 1, 1, shape, 0);
  lua_Number p = lbbb_check_number(L, 2, "p");
  if (!(p >= 0 && p < 1)) return lbbb_argerror(L, 2, "p", "expected a number in [0, 1), got %f", p);
  bbb_rng *g = lbbb_generator_arg(L, 3);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(nd, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  bbb_dropout_mask(bbb_data(u->t), g, u->t->numel, p);
  return 1;
}

/** rand_rows(k, n [, gen]) -> tensor
** k row numbers drawn uniformly from 1..n with replacement, as a (k) tensor
** for index_select: floor(n u) + 1 for u = rand({k}, 0, 1, gen), the product
** taken in double (n where it would pass n): the same numbers and the same
** draws from gen as mapping rand's u in Lua, in one pass. 1 <= n <= 2^24 (so
** that every row number is exact in float32). */
static int t_rand_rows(lua_State *L) {
  lua_Integer k = lbbb_check_integer(L, 1, "k"), n = lbbb_check_integer(L, 2, "n");
  if (k < 0) return lbbb_argerror(L, 1, "k", "expected an integer >= 0, got %I", k);
  if (n < 1 || n > (1 << 24))
    return lbbb_argerror(L, 2, "n", "expected an integer in [1, 2^24], got %I", n);
  bbb_rng *g = lbbb_generator_arg(L, 3);
  int64_t shape[1] = { (int64_t)k };
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  u->t = bbb_tensor_new(1, shape);
  lbbb_check(L, u->t ? BBB_OK : bbb_errstatus());
  bbb_float *x = bbb_data(u->t);
  bbb_rng_uniform(g, x, (int64_t)k, 0, 1);
  for (int64_t i = 0; i < (int64_t)k; i++) {
    double v = floor((double)x[i] * (double)n) + 1;
    x[i] = (bbb_float)(v > (double)n ? (double)n : v);
  }
  return 1;
}

static const luaL_Reg generator_methods[] = {
  {"seed", g_seed}, {"state", g_state}, {"set_state", g_set_state}, {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"Generator", l_generator}, {"manual_seed", l_manual_seed},
  {"randn", t_randn}, {"rand", t_rand}, {"dropout_mask", t_dropout_mask}, {"rand_rows", t_rand_rows},
  {NULL, NULL}
};

void lbbb_open_rng(lua_State *L, const lbbb_tables *tb) {
  luaL_newmetatable(L, BBB_GENERATOR_MT);
  lua_newtable(L);
  for (const luaL_Reg *r = generator_methods; r->name; r++) {
    lua_pushfstring(L, "bbb.Generator.%s", r->name);
    lbbb_pushfunction(L, r->func, lua_tostring(L, -1), 0);
    lua_setfield(L, -3, r->name);
    lua_pop(L, 1);
  }
  lua_setfield(L, -2, "__index");
  lbbb_pushfunction(L, g_tostring, "bbb.Generator.__tostring", 0);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  bbb_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
  bbb_rng_init(g, 0);
  luaL_setmetatable(L, BBB_GENERATOR_MT);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, DEFAULT_KEY);
  lua_setfield(L, tb->module, "default_generator");
  lbbb_register(L, tb, NULL, funcs, NULL);
}
