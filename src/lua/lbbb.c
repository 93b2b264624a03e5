/*
** lbbb.c: luaopen for bbb.core: one table with the Tensor functions, the
** Generator, and the Bayesian kernels.
*/
#include "lbbb.h"

int lbbb_open(lua_State *L) {
  luaL_checkversion(L);
  /* Tensor bytes are reported to the collector as debt (lbbb_account).
  ** The generational mode that lua5.4 starts in drops that debt at every
  ** minor collection, and temporaries then pile up by the gigabyte; the
  ** incremental mode pays it off. */
  lua_gc(L, LUA_GCINC, 0, 0, 0);
  lua_newtable(L);
  lbbb_open_tensor(L);
  lbbb_open_generator(L);
  lbbb_open_bayes(L);
  lbbb_open_bench(L);
  lbbb_open_rdata(L);
  return 1;
}
