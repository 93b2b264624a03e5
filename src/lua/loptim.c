/*
** loptim.c: binding of the fused optimizer updates (src/core/optim.c).
*/
#include "lbbb.h"
#include "optim.h"

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
  {"rmsprop_update", l_rmsprop_update}, {NULL, NULL}
};

void lbbb_open_optim(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
