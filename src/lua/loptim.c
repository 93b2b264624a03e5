/*
** loptim.c: binding of the fused optimizer updates (src/core/optim.c).
** Each update takes the tensors, then one table of hyperparameters:
**   adam_update(p, g, m, v, {lr =, beta1 =, beta2 =, eps =, weight_decay =,
**                            gscale =, step =, dry =})
** With dry = true nothing changes and the call returns how many values the
** update would make non-finite.
** Optional: gmax = a bound on every |g * gscale| (the gradient's norm times
** gscale serves), bound = a table the update keeps its bound in (fields
** known, p, a, b, vp, va, vb; see optim.h). With both, a dry run after an
** applied update usually proves the step finite without reading the data.
** An applied update is never cut short by Ctrl-C: the interrupt is raised
** by the next operation.
*/
#include <math.h>

#include "lbbb.h"
#include "optim.h"

static int l_sqnorm(lua_State *L) {
  lua_pushnumber(L, bbb_sqnorm(lbbb_check_tensor(L, 1, "t")));
  return 1;
}

/* sqnorm_known(t): whether sqnorm(t) would return a sum kept by the pass
** that wrote t (true after a training step's backward for the Bayesian
** layers' gradients) instead of reading t. */
static int l_sqnorm_known(lua_State *L) {
  lua_pushboolean(L, bbb_sqnorm_known(lbbb_check_tensor(L, 1, "t")));
  return 1;
}

/* A number field of the options table at index i, or def when absent. */
static double hyper_number(lua_State *L, int i, const char *key, double def) {
  double v = def;
  int t = lua_getfield(L, i, key);
  if (t == LUA_TNUMBER) v = lua_tonumber(L, -1);
  else if (t != LUA_TNIL)
    lbbb_argerror(L, i, "options", "%s must be a number, got %s", key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* The options table at index i as a bbb_optim_hyper; *dry from its dry field. */
static bbb_optim_hyper check_hyper(lua_State *L, int i, int *dry) {
  bbb_optim_hyper h;
  lbbb_check_table(L, i, "options");
  h.lr = hyper_number(L, i, "lr", NAN);
  h.gscale = hyper_number(L, i, "gscale", 1);
  h.weight_decay = hyper_number(L, i, "weight_decay", 0);
  h.momentum = hyper_number(L, i, "momentum", 0);
  h.beta1 = hyper_number(L, i, "beta1", 0.9);
  h.beta2 = hyper_number(L, i, "beta2", 0.999);
  h.alpha = hyper_number(L, i, "alpha", 0.99);
  h.eps = hyper_number(L, i, "eps", 1e-8);
  double step = hyper_number(L, i, "step", 1);
  if (!(step >= 1 && step < 9e15) || step != (double)(int64_t)step)
    lbbb_argerror(L, i, "options", "step must be an integer >= 1, got %f", step);
  h.step = (int64_t)step;
  h.gmax = hyper_number(L, i, "gmax", NAN);
  lua_getfield(L, i, "nesterov");
  h.nesterov = lua_toboolean(L, -1);
  lua_getfield(L, i, "dry");
  *dry = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return h;
}

/* The options' bound table (field "bound") into *bd; 0 when there is none. */
static int read_bound(lua_State *L, int i, bbb_optim_bound *bd) {
  *bd = (bbb_optim_bound){ 0, 0, 0, 0, 0, 0, 0 };
  int t = lua_getfield(L, i, "bound");
  if (t == LUA_TNIL) { lua_pop(L, 1); return 0; }
  if (t != LUA_TTABLE)
    lbbb_argerror(L, i, "options", "bound must be a table, got %s", luaL_typename(L, -1));
  int top = lua_gettop(L);
  lua_getfield(L, top, "known");
  bd->known = lua_toboolean(L, -1);
  double *d[3] = { &bd->p, &bd->a, &bd->b };
  unsigned *v[3] = { &bd->vp, &bd->va, &bd->vb };
  const char *dk[3] = { "p", "a", "b" }, *vk[3] = { "vp", "va", "vb" };
  for (int j = 0; j < 3; j++) {
    lua_getfield(L, top, dk[j]);
    lua_getfield(L, top, vk[j]);
    int ok;
    lua_Integer ver = lua_tointegerx(L, -1, &ok);
    if (lua_type(L, -2) != LUA_TNUMBER || !ok) bd->known = 0;
    *d[j] = lua_tonumber(L, -2);
    *v[j] = (unsigned)ver;
  }
  lua_settop(L, top - 1);
  return 1;
}

static void write_bound(lua_State *L, int i, const bbb_optim_bound *bd) {
  lua_getfield(L, i, "bound");
  int top = lua_gettop(L);
  lua_pushboolean(L, bd->known);
  lua_setfield(L, top, "known");
  const double d[3] = { bd->p, bd->a, bd->b };
  const unsigned v[3] = { bd->vp, bd->va, bd->vb };
  const char *dk[3] = { "p", "a", "b" }, *vk[3] = { "vp", "va", "vb" };
  for (int j = 0; j < 3; j++) {
    lua_pushnumber(L, d[j]);
    lua_setfield(L, top, dk[j]);
    lua_pushinteger(L, (lua_Integer)v[j]);
    lua_setfield(L, top, vk[j]);
  }
  lua_settop(L, top - 1);
}

enum { SGD, ADAM, RMSPROP };

/* The three updates: the parameter and its gradient, the kind's buffers,
** then the options table (which may carry gmax and a bound table). An
** applied update that succeeded is not turned into an "interrupted" error
** (it ran to its end); the flag stays for the next op. */
static int update(lua_State *L, int kind) {
  static const char *const buf[] = { "buf", "m", "sq" };
  const int opt_at[] = { 4, 5, 4 };
  int i = opt_at[kind], dry;
  bbb_tensor *p = lbbb_check_tensor(L, 1, "p"), *g = lbbb_check_tensor(L, 2, "g");
  bbb_tensor *a = kind == SGD ? lbbb_opt_tensor(L, 3, buf[kind]) : lbbb_check_tensor(L, 3, buf[kind]);
  bbb_tensor *b = kind == ADAM ? lbbb_check_tensor(L, 4, "v") : NULL;
  bbb_optim_hyper h = check_hyper(L, i, &dry);
  bbb_optim_bound bd;
  int has = read_bound(L, i, &bd);
  bbb_optim_bound *pb = has ? &bd : NULL;
  int64_t n = 0;
  int st = kind == SGD ? bbb_sgd_update(p, g, a, &h, pb, dry, &n)
         : kind == ADAM ? bbb_adam_update(p, g, a, b, &h, pb, dry, &n)
         : bbb_rmsprop_update(p, g, a, &h, pb, dry, &n);
  if (st || dry) lbbb_check(L, st);
  else lbbb_account(L);
  if (!dry && has) write_bound(L, i, &bd);
  if (!dry) return 0;
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* sgd_update(p, g, buf|nil, {lr, momentum, nesterov, weight_decay, gscale, gmax, bound, dry}) */
static int l_sgd_update(lua_State *L) { return update(L, SGD); }

/* adam_update(p, g, m, v, {lr, beta1, beta2, eps, weight_decay, gscale, step, gmax, bound, dry}) */
static int l_adam_update(lua_State *L) { return update(L, ADAM); }

/* rmsprop_update(p, g, sq, {lr, alpha, eps, weight_decay, gscale, gmax, bound, dry}) */
static int l_rmsprop_update(lua_State *L) { return update(L, RMSPROP); }

static const luaL_Reg funcs[] = {
  {"sqnorm", l_sqnorm}, {"sqnorm_known", l_sqnorm_known}, {"sgd_update", l_sgd_update}, {"adam_update", l_adam_update},
  {"rmsprop_update", l_rmsprop_update}, {NULL, NULL}
};

void lbbb_open_optim(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
