/*
** loptim.c: binding of the fused optimizer updates (src/bayes/optim.c).
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
#include <string.h>

#include "engine/autograd.h"
#include "lua/lbbb.h"
#include "bayes/optim.h"

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

/* ---- one optimizer step over all parameters ---- */

#define OPTIM_STATE_MT "bbb.OptimState"

/* What a step keeps per parameter between steps: its bound. */
typedef struct { int n; bbb_optim_bound bound[]; } optim_state;

/* optim_state(n) -> the state of an optimizer of n parameters */
static int l_optim_state(lua_State *L) {
  lua_Integer n = lbbb_check_int_range(L, 1, "n", 1, 1 << 20);
  optim_state *s = lua_newuserdatauv(L, sizeof *s + (size_t)n * sizeof s->bound[0], 0);
  s->n = (int)n;
  memset(s->bound, 0, (size_t)n * sizeof s->bound[0]);
  luaL_setmetatable(L, OPTIM_STATE_MT);
  return 1;
}

/* The tensor field key of the table at index i, or NULL when absent. */
static bbb_tensor *field_tensor(lua_State *L, int i, const char *key) {
  bbb_tensor *t = NULL;
  if (lua_getfield(L, i, key) != LUA_TNIL) t = lbbb_check_tensor(L, lua_gettop(L), key);
  lua_pop(L, 1);   /* the list holds the tensor */
  return t;
}

/* norm = optim_step(kind, state, params, h): Optimizer:step's work in one
** call. params: the list of {t =, m =, v = | buf = | sq =, lr_scale =};
** h: {lr, clip_norm, weight_decay, momentum, nesterov, beta1, beta2, alpha,
** eps, step}. Every gradient's norm first (a non-finite one returns nil,
** "grad", i), then a dry run of every update (one that would make values
** non-finite returns nil, "update", i, count, nothing changed), then the
** updates; returns the global norm before clipping. */
static int l_optim_step(lua_State *L) {
  static const char *const kinds[] = { "SGD", "Adam", "RMSprop", NULL };
  static const int codes[] = { SGD, ADAM, RMSPROP };
  int kind = codes[lbbb_check_option(L, 1, "kind", NULL, kinds)];
  optim_state *s = luaL_checkudata(L, 2, OPTIM_STATE_MT);
  lbbb_check_table(L, 3, "params");
  int dry, n = (int)lua_rawlen(L, 3);
  if (n != s->n) return lbbb_argerror(L, 3, "params", "expected %d parameters (the state's), got %d", s->n, n);
  bbb_optim_hyper h = check_hyper(L, 4, &dry);
  double lr = h.lr, clip = hyper_number(L, 4, "clip_norm", NAN);
  double gnorm[64], *gn = n <= 64 ? gnorm : lua_newuserdatauv(L, (size_t)n * sizeof *gn, 0);
  int top = lua_gettop(L);
  /* the list's tensors: p, g, the kind's buffers; the grads are borrowed */
  double total = 0;
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 3, i);
    bbb_tensor *t = field_tensor(L, top + 1, "t"), *g = t ? bbb_tensor_grad(t) : NULL;
    lua_settop(L, top);
    gn[i - 1] = NAN;
    if (!g) continue;
    double sq = bbb_sqnorm(g);
    if (!isfinite(sq)) {
      lua_pushnil(L);
      lua_pushliteral(L, "grad");
      lua_pushinteger(L, i);
      return 3;
    }
    gn[i - 1] = sqrt(sq);
    total += sq;
  }
  double norm = sqrt(total);
  h.gscale = clip == clip && norm > clip ? clip / norm : 1;
  for (int pass = 1; pass >= 0; pass--) {   /* dry, then applied */
    for (int i = 1; i <= n; i++) {
      if (gn[i - 1] != gn[i - 1]) continue;
      lua_rawgeti(L, 3, i);
      int e = top + 1;
      bbb_tensor *p = field_tensor(L, e, "t"), *g = bbb_tensor_grad(p);
      bbb_tensor *a = field_tensor(L, e, kind == SGD ? "buf" : kind == ADAM ? "m" : "sq");
      bbb_tensor *b = kind == ADAM ? field_tensor(L, e, "v") : NULL;
      lua_getfield(L, e, "lr_scale");
      h.lr = lr * (lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 1);
      lua_settop(L, top);
      h.gmax = gn[i - 1] * h.gscale;
      int64_t bad = 0;
      bbb_optim_bound *bd = &s->bound[i - 1];
      int st = kind == SGD ? bbb_sgd_update(p, g, a, &h, bd, pass, &bad)
             : kind == ADAM ? bbb_adam_update(p, g, a, b, &h, bd, pass, &bad)
             : bbb_rmsprop_update(p, g, a, &h, bd, pass, &bad);
      if (st || pass) lbbb_check(L, st);
      else lbbb_account(L);
      if (bad > 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "update");
        lua_pushinteger(L, i);
        lua_pushinteger(L, (lua_Integer)bad);
        return 4;
      }
    }
  }
  (void)dry;   /* the table's dry flag: this call runs both passes itself */
  lua_pushnumber(L, norm);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"sqnorm", l_sqnorm}, {"sqnorm_known", l_sqnorm_known}, {"sgd_update", l_sgd_update}, {"adam_update", l_adam_update},
  {"rmsprop_update", l_rmsprop_update}, {"optim_state", l_optim_state}, {"optim_step", l_optim_step},
  {NULL, NULL}
};

void lbbb_open_optim(lua_State *L, const lbbb_tables *tb) {
  luaL_newmetatable(L, OPTIM_STATE_MT);
  lua_pop(L, 1);
  lbbb_register_internal(L, tb, funcs);
}
