/*
** lbbb.c: luaopen for bbb.core: one table with the Tensor functions, the
** Generator, and the Bayesian kernels.
*/
#include "lbbb.h"

int lbbb_open(lua_State *L) {
  luaL_checkversion(L);
  lua_newtable(L);
  lbbb_open_tensor(L);
  lbbb_open_generator(L);
  lbbb_open_bayes(L);
  return 1;
}
