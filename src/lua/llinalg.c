/*
** llinalg.c: binding of the eigendecomposition (src/engine/linalg.c) that
** bbb.laplace builds on.
*/
#include "lua/lbbb.h"
#include "engine/linalg.h"

/* Scratch that the collector frees, whichever way the call ends. */
static double *scratch(lua_State *L, int64_t count) {
  return lua_newuserdatauv(L, sizeof(double) * (size_t)(count > 0 ? count : 1), 0);
}

/* The Lua rows at arg 1 as a row-major (n, n) matrix of doubles. */
static double *matrix_arg(lua_State *L, int64_t *n) {
  lua_Integer rows = luaL_len(L, 1);
  if (rows < 0 || rows > 16384) lbbb_argerror(L, 1, "a", "expected at most 16384 rows, got %I", rows);
  *n = (int64_t)rows;
  double *a = scratch(L, rows * rows);
  for (lua_Integer i = 1; i <= rows; i++) {
    if (lua_geti(L, 1, i) != LUA_TTABLE || luaL_len(L, -1) != rows)
      lbbb_argerror(L, 1, "a", "row %I must be a table of %I numbers", i, rows);
    for (lua_Integer j = 1; j <= rows; j++) {
      if (lua_geti(L, -1, j) != LUA_TNUMBER) lbbb_argerror(L, 1, "a", "(%I, %I) is not a number", i, j);
      a[(i - 1) * rows + (j - 1)] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return a;
}

/** eigh(a) -> values, vectors
** eigh(x, true) -> values, vectors
** The eigendecomposition of the symmetric part of a, an (n, n) tensor or
** n Lua rows of n numbers (kept in double), or with true of x^T x for an
** (N, n) tensor x (formed in double, not in float32): values a Lua array
** of the n eigenvalues, ascending, as doubles; vectors an (n, n) tensor
** whose column j is the unit eigenvector of values[j]. Computed in double
** precision (LAPACK dsyevd); the input must be finite. */
static int l_eigh(lua_State *L) {
  lua_settop(L, 2);
  int64_t n;
  double *a = NULL;
  bbb_tensor *x = NULL;
  if (lua_type(L, 1) == LUA_TTABLE) a = matrix_arg(L, &n);
  else {
    x = lbbb_check_tensor(L, 1, "x");
    n = x->ndim == 2 ? x->shape[1] : 0;
  }
  double *values = scratch(L, n);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, a ? bbb_eigh_doubles(values, &u->t, a, n) : bbb_eigh(values, &u->t, x, lua_toboolean(L, 2)));
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lua_pushnumber(L, values[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_insert(L, -2);
  return 2;
}

static const luaL_Reg funcs[] = {
  {"eigh", l_eigh}, {NULL, NULL}
};

void lbbb_open_linalg(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
