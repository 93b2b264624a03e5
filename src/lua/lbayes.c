/*
** lbayes.c: binding of the fused Bayesian kernels and the C priors
** (src/bayes/bayes.c).
*/
#include <stdio.h>
#include <string.h>

#include "lua/lbbb.h"
#include "bayes/bayes.h"

/* A number field of the prior table at arg (0 when absent). */
static double prior_field(lua_State *L, int arg, const char *key) {
  int t = lua_getfield(L, arg, key);
  double v = lua_tonumber(L, -1);
  if (t != LUA_TNUMBER && t != LUA_TNIL)
    lbbb_argerror(L, arg, "prior", "field %s must be a number, got %s", key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* The kinds a table may name, for the message that refuses another:
** "gaussian", "mixture", ... or "none". */
static const char *kind_list(char *buf, size_t size) {
  size_t n = 0;
  for (int k = BBB_PRIOR_NONE + 1; k < BBB_PRIOR_COUNT && n < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "\"%s\", ", bbb_prior_info_of(k)->name);
  if (n < size) snprintf(buf + n - 2, size - n + 2, " or \"none\"");   /* in place of the last ", " */
  return buf;
}

/* A prior from a table: {kind = a kind of BBB_PRIORS (bayes.h) or "none",
** and the kind's parameters by name}. */
bbb_prior lbbb_check_prior(lua_State *L, int arg) {
  bbb_prior p = { BBB_PRIOR_NONE, { 0 } };
  char buf[256];
  if (lua_isnoneornil(L, arg)) return p;
  lbbb_check_table(L, arg, "prior");
  int t = lua_getfield(L, arg, "kind");
  if (t != LUA_TNIL && t != LUA_TSTRING)
    lbbb_argerror(L, arg, "prior", "field kind must be a string, got %s", luaL_typename(L, -1));
  const char *k = t == LUA_TNIL ? "none" : lua_tostring(L, -1);
  int kind = bbb_prior_kind_named(k);
  if (kind < 0)
    lbbb_argerror(L, arg, "prior", "unknown kind \"%s\" (expected %s)", k, kind_list(buf, sizeof buf));
  lua_pop(L, 1);
  p.kind = kind;
  const bbb_prior_info *in = bbb_prior_info_of(kind);
  for (int i = 0; in && i < in->npar; i++) {
    int j = bbb_prior_param_at(in, i);
    p.par[j] = prior_field(L, arg, in->par[j].name);
  }
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

/* prior_kinds() -> the C priors of BBB_PRIORS, in its order, as
** {{kind = "gaussian", label = "Gaussian", params = {"sigma"},
** rules = {"scale"}}, ...} (a rule: "scale", finite and > 0, or "unit", in
** (0, 1)): bbb.prior builds its constructors, descriptions and configs from
** it, and the command line its choices. */
static int l_prior_kinds(lua_State *L) {
  lua_createtable(L, BBB_PRIOR_COUNT - 1, 0);
  for (int k = BBB_PRIOR_NONE + 1; k < BBB_PRIOR_COUNT; k++) {
    const bbb_prior_info *in = bbb_prior_info_of(k);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, in->name);
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, in->label);
    lua_setfield(L, -2, "label");
    lua_createtable(L, in->npar, 0);
    lua_createtable(L, in->npar, 0);
    for (int j = 0; j < in->npar; j++) {
      lua_pushstring(L, in->par[j].name);
      lua_rawseti(L, -3, j + 1);
      lua_pushstring(L, in->par[j].rule == BBB_PAR_UNIT ? "unit" : "scale");
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -3, "rules");
    lua_setfield(L, -2, "params");
    lua_rawseti(L, -2, k - BBB_PRIOR_NONE);
  }
  return 1;
}

static const luaL_Reg funcs[] = {
  {"bayes_sample", l_bayes_sample}, {"prior_log_prob", l_prior_log_prob},
  {"check_prior", l_check_prior}, {"prior_kinds", l_prior_kinds}, {NULL, NULL}
};

void lbbb_open_bayes(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
