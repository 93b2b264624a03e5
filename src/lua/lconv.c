/*
** lconv.c: binding of conv2d and pooling (src/engine/ops_conv.c). Options
** follow PyTorch's F.conv2d: each is an integer or a pair {height, width}.
*/
#include <stdio.h>

#include "lua/lbbb.h"
#include "engine/ops.h"

/* The value at stack index at as a pair: an integer (both entries) or a
** list of two; each at least lo. what names it in the error ("argument 3
** (options): stride"). */
static void pair_at(lua_State *L, int at, const char *fn, const char *what, int lo, int v[2]) {
  int ok = 1;
  if (lua_type(L, at) == LUA_TNUMBER) {
    lua_Integer n = lua_tointegerx(L, at, &ok);
    v[0] = v[1] = (int)n;
    ok = ok && n >= lo && n <= (1 << 24);
  } else if (lua_type(L, at) == LUA_TTABLE && luaL_len(L, at) == 2) {
    for (int k = 0; k < 2; k++) {
      int isint;
      lua_geti(L, at, k + 1);
      lua_Integer n = lua_tointegerx(L, -1, &isint);
      lua_pop(L, 1);
      v[k] = (int)n;
      ok = ok && isint && n >= lo && n <= (1 << 24);
    }
  } else {
    ok = 0;
  }
  if (ok) return;
  if (lua_type(L, at) == LUA_TTABLE) {   /* show the entries, not an address */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '{');
    for (lua_Integer k = 1; k <= luaL_len(L, at) && k <= 4; k++) {
      if (k > 1) luaL_addstring(&b, ", ");
      lua_geti(L, at, k);
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
      luaL_addvalue(&b);
    }
    luaL_addstring(&b, luaL_len(L, at) > 4 ? ", ...}" : "}");
    luaL_pushresult(&b);
  } else {
    luaL_tolstring(L, at, NULL);
  }
  luaL_error(L, "%s: %s must be an integer >= %d or a pair of them, got %s", fn, what, lo,
             lua_tostring(L, -1));
}

/* Field key of the options table at i as a pair; def when absent (returns 0). */
static int opt_pair(lua_State *L, int i, const char *fn, const char *key, int def, int lo,
                    int v[2]) {
  char what[64];
  v[0] = v[1] = def;
  if (lua_isnoneornil(L, i)) return 0;
  if (lua_getfield(L, i, key) == LUA_TNIL) { lua_pop(L, 1); return 0; }
  snprintf(what, sizeof what, "argument %d (options): %s", i, key);
  pair_at(L, lua_gettop(L), fn, what, lo, v);
  lua_pop(L, 1);
  return 1;
}

/* The options table at i (nil allowed): stride, padding, dilation, groups;
** stride defaults to def_stride when given (pooling: the kernel size). */
static bbb_conv_opts check_opts(lua_State *L, int i, const char *fn, const int *def_stride) {
  bbb_conv_opts o;
  if (!lua_isnoneornil(L, i) && !lua_istable(L, i))
    luaL_error(L, "%s: argument %d (options): expected a table, got %s", fn, i, luaL_typename(L, i));
  if (!opt_pair(L, i, fn, "stride", 1, 1, o.stride) && def_stride) {
    o.stride[0] = def_stride[0]; o.stride[1] = def_stride[1];
  }
  opt_pair(L, i, fn, "padding", 0, 0, o.pad);
  opt_pair(L, i, fn, "dilation", 1, 1, o.dil);
  int g[2];
  opt_pair(L, i, fn, "groups", 1, 1, g);
  if (g[0] != g[1])
    luaL_error(L, "%s: argument %d (options): groups must be one integer, got a pair", fn, i);
  o.groups = g[0];
  return o;
}

/** conv2d(x, w [, b] [, {stride =, padding =, dilation =, groups =}]) -> tensor
** 2-d convolution (cross-correlation, as PyTorch's F.conv2d) of x (B, Cin, H, W)
** with w (Cout, Cin / groups, kH, kW) plus b (Cout): (B, Cout, oH, oW). Each
** option is an integer or a pair {height, width}; defaults stride 1,
** padding 0, dilation 1, groups 1. By im2col and sgemm, tiled over the
** batch within conv_workspace() bytes; differentiable in x, w and b. */
static int l_conv2d(lua_State *L) {
  lua_settop(L, 4);
  bbb_tensor *x = lbbb_check_tensor(L, 1, "input"), *w = lbbb_check_tensor(L, 2, "weight");
  int at = lua_istable(L, 3) ? 3 : 4;   /* conv2d(x, w, opts): no bias */
  bbb_tensor *b = at == 3 ? NULL : lbbb_opt_tensor(L, 3, "bias");
  bbb_conv_opts o = check_opts(L, at, "bbb.conv2d", NULL);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return lbbb_result(L, bbb_conv2d(&u->t, x, w, b, &o));
}

/** conv2d_local(x, mu, var, bias_mu, bias_var, eps [, opts]) -> tensor
** The local reparameterization of a Bayesian convolution in one op:
** conv2d(x, mu) + bias_mu + sqrt(conv2d(x^2, var) + bias_var + 1e-16) * eps,
** eps of the output's shape (B, Cout, oH, oW); the biases both tensors or
** both nil; conv2d's options. x^2 is never formed: each batch tile's
** columns serve both convolutions. Differentiable in x, mu, var and the
** biases; eps is noise and takes no gradient. */
static int l_conv2d_local(lua_State *L) {
  lua_settop(L, 7);
  bbb_tensor *x = lbbb_check_tensor(L, 1, "input"), *mu = lbbb_check_tensor(L, 2, "mu");
  bbb_tensor *var = lbbb_check_tensor(L, 3, "var"), *bm = lbbb_opt_tensor(L, 4, "bias_mu");
  bbb_tensor *bv = lbbb_opt_tensor(L, 5, "bias_var"), *eps = lbbb_check_tensor(L, 6, "eps");
  bbb_conv_opts o = check_opts(L, 7, "bbb.conv2d_local", NULL);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return lbbb_result(L, bbb_conv2d_local(&u->t, x, mu, var, bm, bv, eps, &o));
}

/** conv2d_flipout(x, mu, dw, bias, s_in, s_out [, opts]) -> tensor
** Flipout for a convolution in one op: conv2d(x, mu) + bias +
** conv2d(x * s_in, dw) * s_out, with signs s_in (B, Cin) and s_out (B, Cout)
** per image and channel (or (B, C, 1, 1)); bias may be nil; conv2d's
** options. x * s_in is never formed. Differentiable in x, mu, dw and bias;
** the signs take no gradient. */
static int l_conv2d_flipout(lua_State *L) {
  lua_settop(L, 7);
  bbb_tensor *x = lbbb_check_tensor(L, 1, "input"), *mu = lbbb_check_tensor(L, 2, "mu");
  bbb_tensor *dw = lbbb_check_tensor(L, 3, "dw"), *b = lbbb_opt_tensor(L, 4, "bias");
  bbb_tensor *si = lbbb_check_tensor(L, 5, "s_in"), *so = lbbb_check_tensor(L, 6, "s_out");
  bbb_conv_opts o = check_opts(L, 7, "bbb.conv2d_flipout", NULL);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return lbbb_result(L, bbb_conv2d_flipout(&u->t, x, mu, dw, b, si, so, &o));
}

static int pool(lua_State *L, int max) {
  const char *fn = max ? "bbb.max_pool2d" : "bbb.avg_pool2d";
  lua_settop(L, 3);
  bbb_tensor *x = lbbb_check_tensor(L, 1, "input");
  int k[2];
  pair_at(L, 2, fn, "argument 2 (kernel_size): the kernel size", 1, k);
  bbb_conv_opts o = check_opts(L, 3, fn, k);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return lbbb_result(L, max ? bbb_max_pool2d(&u->t, x, k, &o) : bbb_avg_pool2d(&u->t, x, k, &o));
}

/** max_pool2d(x, kernel_size [, {stride =, padding =}]) -> tensor
** The maximum over each window of x (B, C, H, W); stride defaults to the
** kernel size, padding (at most half the kernel) is never the maximum.
** The gradient goes to the first maximum of each window. */
static int l_max_pool2d(lua_State *L) { return pool(L, 1); }

/** avg_pool2d(x, kernel_size [, {stride =, padding =}]) -> tensor
** The mean over each window of x (B, C, H, W), padding counted as zeros;
** stride defaults to the kernel size. */
static int l_avg_pool2d(lua_State *L) { return pool(L, 0); }

/** conv_workspace([bytes]) -> bytes
** The cap on conv2d's scratch memory per thread (4 MiB by default): the
** batch is processed in tiles of as many images as fit (at least one). With an
** argument, sets it and returns the previous cap. */
static int l_conv_workspace(lua_State *L) {
  lua_Integer n = luaL_optinteger(L, 1, 0);
  if (!lua_isnoneornil(L, 1) && n < 1)
    return luaL_error(L, "conv_workspace: argument 1 (bytes): must be positive, got %I", n);
  lua_pushinteger(L, bbb_conv_workspace(n));
  return 1;
}

/** pool_fast_path([on]) -> boolean
** Whether max_pool2d takes its 2x2 stride-2 kernels (on by default) or the
** general loops for every window; with an argument, sets it and returns the
** previous setting. The two give the same bits: the switch is for tests. */
static int l_pool_fast_path(lua_State *L) {
  int on = -1;
  if (!lua_isnoneornil(L, 1)) {
    if (!lua_isboolean(L, 1))
      return luaL_error(L, "pool_fast_path: argument 1 (on): expected a boolean, got %s",
                        luaL_typename(L, 1));
    on = lua_toboolean(L, 1);
  }
  lua_pushboolean(L, bbb_pool_fast_path(on));
  return 1;
}

static const luaL_Reg funcs[] = {
  {"conv2d", l_conv2d}, {"conv2d_local", l_conv2d_local}, {"conv2d_flipout", l_conv2d_flipout},
  {"max_pool2d", l_max_pool2d}, {"avg_pool2d", l_avg_pool2d},
  {"conv_workspace", l_conv_workspace}, {"pool_fast_path", l_pool_fast_path}, {NULL, NULL}
};

void lbbb_open_conv(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, funcs, NULL);
}
