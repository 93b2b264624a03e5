/*
** lbayes.c: binding of the fused Bayesian kernels, C priors and file
** loaders (src/core/bayes.c, io.c).
*/
#include <string.h>

#include "lbbb.h"
#include "bayes.h"
#include "io.h"
#include "optim.h"

/* A prior from a table: {kind = "gaussian" | "mixture" | "laplace" | "none",
** sigma = , pi = , sigma1 = , sigma2 = , b = } */
static bbb_prior check_prior(lua_State *L, int i) {
  bbb_prior p = { BBB_PRIOR_NONE, 0, 0, 0 };
  if (lua_isnoneornil(L, i)) return p;
  luaL_checktype(L, i, LUA_TTABLE);
  lua_getfield(L, i, "kind");
  const char *k = luaL_optstring(L, -1, "none");
  lua_pop(L, 1);
  if (strcmp(k, "gaussian") == 0) p.kind = BBB_PRIOR_GAUSSIAN;
  else if (strcmp(k, "mixture") == 0) p.kind = BBB_PRIOR_MIXTURE;
  else if (strcmp(k, "laplace") == 0) p.kind = BBB_PRIOR_LAPLACE;
  else if (strcmp(k, "none") != 0) luaL_error(L, "prior: unknown kind '%s'", k);
  const char *s1 = p.kind == BBB_PRIOR_GAUSSIAN ? "sigma" : p.kind == BBB_PRIOR_LAPLACE ? "b" : "sigma1";
  lua_getfield(L, i, s1);   p.sigma1 = luaL_optnumber(L, -1, 0); lua_pop(L, 1);
  lua_getfield(L, i, "sigma2"); p.sigma2 = luaL_optnumber(L, -1, 0); lua_pop(L, 1);
  lua_getfield(L, i, "pi"); p.pi = luaL_optnumber(L, -1, 0); lua_pop(L, 1);
  lbbb_check(L, bbb_prior_check(&p));
  return p;
}

/* w, kl = bayes_sample(mu, rho [, prior [, generator [, eps]]]) */
static int l_bayes_sample(lua_State *L) {
  lua_settop(L, 5);
  bbb_tensor *mu = lbbb_check_tensor(L, 1), *rho = lbbb_check_tensor(L, 2);
  bbb_prior p = check_prior(L, 3);
  bbb_rng *g = lbbb_generator_arg(L, 4);
  bbb_tensor *eps = lbbb_opt_tensor(L, 5);
  lbbb_tensor_ud *w = lbbb_new_tensor(L), *kl = lbbb_new_tensor(L);
  bbb_tensor *tw, *tkl;
  lbbb_check(L, bbb_bayes_sample(&tw, &tkl, mu, rho, &p, g, eps));
  w->t = tw; kl->t = tkl;
  return 2;
}

/* prior_log_prob(prior, w) -> 0-d tensor */
static int l_prior_log_prob(lua_State *L) {
  bbb_prior p = check_prior(L, 1);
  bbb_tensor *w = lbbb_check_tensor(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_prior_log_prob(&u->t, &p, w));
  return 1;
}

static int l_check_prior(lua_State *L) { check_prior(L, 1); return 0; }

/* load_idx(path [, scale [, offset [, limit]]]) */
static int l_load_idx(lua_State *L) {
  lua_settop(L, 4);
  const char *path = luaL_checkstring(L, 1);
  lua_Number scale = luaL_optnumber(L, 2, 1), offset = luaL_optnumber(L, 3, 0);
  lua_Integer limit = luaL_optinteger(L, 4, -1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_idx_load(&u->t, path, scale, offset, limit));
  return 1;
}

/* ---- optimizer updates: (p, g, state..., gscale, hyper-parameters...) ---- */

static int l_sqnorm(lua_State *L) {
  lua_pushnumber(L, bbb_sqnorm(lbbb_check_tensor(L, 1)));
  return 1;
}

static int l_sgd_update(lua_State *L) {
  lua_settop(L, 8);
  bbb_tensor *p = lbbb_check_tensor(L, 1), *g = lbbb_check_tensor(L, 2), *buf = lbbb_opt_tensor(L, 3);
  lbbb_check(L, bbb_sgd_update(p, g, buf, luaL_checknumber(L, 4), luaL_checknumber(L, 5),
                               luaL_checknumber(L, 6), lua_toboolean(L, 7), luaL_checknumber(L, 8)));
  return 0;
}

static int l_adam_update(lua_State *L) {
  bbb_tensor *p = lbbb_check_tensor(L, 1), *g = lbbb_check_tensor(L, 2);
  bbb_tensor *m = lbbb_check_tensor(L, 3), *v = lbbb_check_tensor(L, 4);
  lbbb_check(L, bbb_adam_update(p, g, m, v, luaL_checknumber(L, 5), luaL_checknumber(L, 6),
                                luaL_checknumber(L, 7), luaL_checknumber(L, 8), luaL_checknumber(L, 9),
                                luaL_checknumber(L, 10), luaL_checkinteger(L, 11)));
  return 0;
}

static int l_rmsprop_update(lua_State *L) {
  bbb_tensor *p = lbbb_check_tensor(L, 1), *g = lbbb_check_tensor(L, 2), *sq = lbbb_check_tensor(L, 3);
  lbbb_check(L, bbb_rmsprop_update(p, g, sq, luaL_checknumber(L, 4), luaL_checknumber(L, 5),
                                   luaL_checknumber(L, 6), luaL_checknumber(L, 7), luaL_checknumber(L, 8)));
  return 0;
}

static const luaL_Reg funcs[] = {
  {"sqnorm", l_sqnorm}, {"sgd_update", l_sgd_update}, {"adam_update", l_adam_update},
  {"rmsprop_update", l_rmsprop_update},
  {"bayes_sample", l_bayes_sample}, {"prior_log_prob", l_prior_log_prob},
  {"check_prior", l_check_prior}, {"load_idx", l_load_idx}, {NULL, NULL}
};

void lbbb_open_bayes(lua_State *L) { luaL_setfuncs(L, funcs, 0); }
