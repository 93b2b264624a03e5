/*
** lbayes.c: binding of the fused Bayesian kernels and the C priors
** (src/core/bayes.c).
*/
#include <string.h>

#include "lbbb.h"
#include "bayes.h"

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

static const luaL_Reg funcs[] = {
  {"bayes_sample", l_bayes_sample}, {"prior_log_prob", l_prior_log_prob},
  {"check_prior", l_check_prior}, {NULL, NULL}
};

void lbbb_open_bayes(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
