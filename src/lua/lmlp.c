/*
** lmlp.c: binding of the fused ReLU-network gradient (src/bayes/mlp.c).
**   m = mlp_new(layers, generator | nil)
**     layers: a list, each {w =, b =, dropout =} (plain) or
**     {wmu =, wrho =, bmu =, brho =, prior = {kind =, ...}}
**     (Bayesian; every layer of one kind); dropout = p on a plain hidden
**     layer drops its ReLU's outputs. The generator draws the Bayesian
**     layers' noise and the dropout masks. The tensors are held, not copied:
**     the step reads and writes them where they are.
**   nll, kl, loss = mlp_grad(m, x, y, sigma, kl_weight)
**     sets every parameter's gradient (see mlp.h); the terms as numbers.
*/
#include <string.h>

#include "lua/lbbb.h"
#include "bayes/mlp.h"

#define MLP_MT "bbb.MLP"

static int mlp_gc(lua_State *L) {
  bbb_mlp_free(luaL_checkudata(L, 1, MLP_MT));
  return 0;
}

/* Field key of the layer table at index t: a tensor or nil; the userdata
** goes into the holder table at index hold, which keeps it alive. */
static bbb_tensor *layer_tensor(lua_State *L, int t, int l, const char *key, int hold) {
  bbb_tensor *x = NULL;
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    if (!lbbb_is_tensor(L, -1))
      lbbb_argerror(L, 1, "layers", "layer %d's %s must be a tensor, got %s", l, key, luaL_typename(L, -1));
    x = lbbb_check_tensor(L, -1, key);
    lua_rawseti(L, hold, (lua_Integer)lua_rawlen(L, hold) + 1);
  } else {
    lua_pop(L, 1);
  }
  return x;
}

static int l_mlp_new(lua_State *L) {
  lua_settop(L, 2);
  lbbb_check_table(L, 1, "layers");
  int n = (int)lua_rawlen(L, 1);
  if (n < 1 || n > BBB_MLP_MAX_LAYERS)
    return lbbb_argerror(L, 1, "layers", "expected 1 to %d layers, got %d", BBB_MLP_MAX_LAYERS, n);
  bbb_mlp *m = lua_newuserdatauv(L, sizeof *m, 1);
  memset(m, 0, sizeof *m);
  luaL_setmetatable(L, MLP_MT);
  int ud = lua_gettop(L);
  lua_createtable(L, 4 * n + 1, 0);
  int hold = lua_gettop(L);
  m->n = n;
  int drops = 0;
  for (int l = 1; l <= n; l++) {
    if (lua_rawgeti(L, 1, l) != LUA_TTABLE)
      return lbbb_argerror(L, 1, "layers", "layer %d must be a table, got %s", l, luaL_typename(L, -1));
    int t = lua_gettop(L);
    bbb_mlp_layer *ly = &m->layer[l - 1];
    lua_getfield(L, t, "wmu");
    int bayes = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (l == 1) m->bayes = bayes;
    else if (bayes != m->bayes)
      return lbbb_argerror(L, 1, "layers", "layer %d is %s, layer 1 is not", l, bayes ? "Bayesian" : "plain");
    if (bayes) {
      ly->wmu = layer_tensor(L, t, l, "wmu", hold);
      ly->wrho = layer_tensor(L, t, l, "wrho", hold);
      ly->bmu = layer_tensor(L, t, l, "bmu", hold);
      ly->brho = layer_tensor(L, t, l, "brho", hold);
      lua_getfield(L, t, "prior");
      ly->prior = lbbb_check_prior(L, lua_gettop(L));
      lua_pop(L, 1);
    } else {
      ly->w = layer_tensor(L, t, l, "w", hold);
      ly->b = layer_tensor(L, t, l, "b", hold);
    }
    lua_getfield(L, t, "dropout");
    ly->dropout = lua_tonumber(L, -1);
    lua_pop(L, 2);
    drops += ly->dropout != 0;
  }
  if ((m->bayes || drops) && !lua_isnil(L, 2)) {   /* without one, bbb_mlp_check says so */
    m->gen = lbbb_check_generator(L, 2, "generator");
    lua_pushvalue(L, 2);
    lua_rawseti(L, hold, (lua_Integer)lua_rawlen(L, hold) + 1);
  }
  lbbb_check(L, bbb_mlp_check(m));
  lua_setiuservalue(L, ud, 1);
  return 1;
}

static int l_mlp_grad(lua_State *L) {
  bbb_mlp *m = luaL_checkudata(L, 1, MLP_MT);
  bbb_tensor *x = lbbb_check_tensor(L, 2, "x"), *y = lbbb_check_tensor(L, 3, "y");
  double sigma = lbbb_check_positive(L, 4, "sigma"), kw = lbbb_check_finite(L, 5, "kl_weight");
  bbb_mlp_terms t;
  lbbb_check(L, bbb_mlp_grad(m, x, y, sigma, kw, &t));
  lua_pushnumber(L, t.nll);
  lua_pushnumber(L, t.kl);
  lua_pushnumber(L, t.loss);
  return 3;
}

static const luaL_Reg funcs[] = { {"mlp_new", l_mlp_new}, {"mlp_grad", l_mlp_grad}, {NULL, NULL} };

void lbbb_open_mlp(lua_State *L, const lbbb_tables *tb) {
  if (luaL_newmetatable(L, MLP_MT)) {
    lua_pushcfunction(L, mlp_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lbbb_register_internal(L, tb, funcs);
}
