/*
** lbayes.c: binding of the fused Bayesian kernels and the C priors
** (src/bayes/bayes.c).
*/
#include <string.h>

#include "lua/lbbb.h"
#include "bayes/bayes.h"

/* A prior from a table: {kind = "gaussian" | "mixture" | "laplace" | "none",
** sigma = , pi = , sigma1 = , sigma2 = , b = } */
/* A number field of the prior table at arg (0 when absent). */
static double prior_field(lua_State *L, int arg, const char *key) {
  int t = lua_getfield(L, arg, key);
  double v = lua_tonumber(L, -1);
  if (t != LUA_TNUMBER && t != LUA_TNIL)
    lbbb_argerror(L, arg, "prior", "field %s must be a number, got %s", key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

bbb_prior lbbb_check_prior(lua_State *L, int arg) {
  static const char *const kinds[] = { "none", "gaussian", "mixture", "laplace", NULL };
  static const int codes[] = { BBB_PRIOR_NONE, BBB_PRIOR_GAUSSIAN, BBB_PRIOR_MIXTURE, BBB_PRIOR_LAPLACE };
  bbb_prior p = { BBB_PRIOR_NONE, 0, 0, 0 };
  if (lua_isnoneornil(L, arg)) return p;
  lbbb_check_table(L, arg, "prior");
  int t = lua_getfield(L, arg, "kind");
  if (t != LUA_TNIL && t != LUA_TSTRING)
    lbbb_argerror(L, arg, "prior", "field kind must be a string, got %s", luaL_typename(L, -1));
  const char *k = t == LUA_TNIL ? "none" : lua_tostring(L, -1);
  int found = -1;
  for (int j = 0; kinds[j]; j++)
    if (strcmp(kinds[j], k) == 0) found = j;
  if (found < 0)
    lbbb_argerror(L, arg, "prior", "unknown kind \"%s\" (expected \"gaussian\", \"mixture\", "
                  "\"laplace\" or \"none\")", k);
  lua_pop(L, 1);
  p.kind = codes[found];
  const char *s1 = p.kind == BBB_PRIOR_GAUSSIAN ? "sigma" : p.kind == BBB_PRIOR_LAPLACE ? "b" : "sigma1";
  p.sigma1 = prior_field(L, arg, s1);
  p.sigma2 = prior_field(L, arg, "sigma2");
  p.pi = prior_field(L, arg, "pi");
  lbbb_check(L, bbb_prior_check(&p));
  return p;
}

/* w, kl = bayes_sample(mu, rho [, prior [, generator [, eps [, out]]]]);
** out: "w" (the default), "var" (sigma^2) or "delta" (sigma eps) */
static int l_bayes_sample(lua_State *L) {
  static const char *const outs[] = { "w", "var", "delta", NULL };   /* bbb_sample_out's order */
  lua_settop(L, 6);
  int out = lbbb_check_option(L, 6, "out", "w", outs);
  bbb_tensor *mu = lbbb_check_tensor(L, 1, "mu"), *rho = lbbb_check_tensor(L, 2, "rho");
  bbb_prior p = lbbb_check_prior(L, 3);
  bbb_rng *g = lbbb_generator_arg(L, 4);
  bbb_tensor *eps = lbbb_opt_tensor(L, 5, "eps");
  lbbb_tensor_ud *w = lbbb_new_tensor(L), *kl = lbbb_new_tensor(L);
  bbb_tensor *tw, *tkl;
  lbbb_check(L, bbb_bayes_sample(&tw, &tkl, mu, rho, &p, g, eps, out));
  w->t = tw; kl->t = tkl;
  return 2;
}

/* prior_log_prob(prior, w) -> 0-d tensor */
static int l_prior_log_prob(lua_State *L) {
  bbb_prior p = lbbb_check_prior(L, 1);
  bbb_tensor *w = lbbb_check_tensor(L, 2, "w");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_prior_log_prob(&u->t, &p, w));
  return 1;
}

static int l_check_prior(lua_State *L) { lbbb_check_prior(L, 1); return 0; }

static const luaL_Reg funcs[] = {
  {"bayes_sample", l_bayes_sample}, {"prior_log_prob", l_prior_log_prob},
  {"check_prior", l_check_prior}, {NULL, NULL}
};

void lbbb_open_bayes(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
