/*
** lautograd.c: gradients from Lua (src/engine/autograd.c): marking
** parameters, backward, reading and resetting .grad, grad mode.
*/
#include "lua/lbbb.h"
#include "engine/autograd.h"

static bbb_tensor *check(lua_State *L, int i) { return lbbb_check_tensor(L, i, "x"); }

/** requires_grad(x [, on]) -> x | boolean
** Marks a leaf tensor as a parameter whose gradient backward() accumulates in
** x.grad; without on, tells whether x requires a gradient.
** @usage
**   local w = bbb.randn(3):requires_grad(true)
**   assert(w:requires_grad() == true) */
static int t_requires_grad(lua_State *L) {
  bbb_tensor *t = check(L, 1);
  if (lua_isnone(L, 2)) { lua_pushboolean(L, bbb_tensor_requires_grad(t)); return 1; }
  lbbb_check(L, bbb_requires_grad(t, lua_toboolean(L, 2)));
  lua_settop(L, 1);
  return 1;
}

/** backward(loss [, seed [, retain_graph]])
** Accumulates (+=) d loss / d p into p.grad for every parameter p that loss
** depends on, then frees the graph unless retain_graph. loss must have one
** element unless a seed gradient of its shape is given.
** @usage
**   local w = bbb.tensor{ 1, 2, 3 }:requires_grad(true)
**   local loss = (w * w):sum()
**   loss:backward()
**   assert(w.grad:get(3) == 6)   -- d/dw sum(w^2) = 2 w */
static int t_backward(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *t = lbbb_check_tensor(L, 1, "loss"), *seed = lbbb_opt_tensor(L, 2, "seed");
  lbbb_check(L, bbb_backward(t, seed, lua_toboolean(L, 3)));
  return 0;
}

/** zero_grad(x) -> x
** Sets x.grad to zero in place, if x has a gradient. */
static int t_zero_grad(lua_State *L) {
  bbb_grad_zero(check(L, 1));
  lua_settop(L, 1);
  return 1;
}

/** set_grad(x, g | nil) -> x
** Replaces x.grad by a copy of g (same shape), or clears it. */
static int t_set_grad(lua_State *L) {   /* t:set_grad(nil | tensor) */
  lua_settop(L, 2);
  lbbb_check(L, bbb_grad_set(check(L, 1), lbbb_opt_tensor(L, 2, "g")));
  lua_settop(L, 1);
  return 1;
}

/** is_leaf(x) -> boolean
** True unless x was computed by a recorded op. */
static int t_is_leaf(lua_State *L) { lua_pushboolean(L, bbb_node_of(check(L, 1)) == NULL); return 1; }

/** grad_fn(x) -> string | nil
** The name of the op that computed x, nil for a leaf. */
static int t_grad_fn(lua_State *L) {
  const char *name = bbb_grad_fn_name(check(L, 1));
  if (name) lua_pushstring(L, name); else lua_pushnil(L);
  return 1;
}

/** set_grad_enabled(on) -> previous
** Turns gradient recording on or off (see bbb.no_grad). */
static int l_set_grad_enabled(lua_State *L) {
  lua_pushboolean(L, bbb_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

/** is_grad_enabled() -> boolean
** Whether ops record the graph for backward(). */
static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, bbb_grad_enabled());
  return 1;
}

static const luaL_Reg methods[] = {
  {"requires_grad", t_requires_grad}, {"backward", t_backward},
  {"zero_grad", t_zero_grad}, {"set_grad", t_set_grad}, {"is_leaf", t_is_leaf},
  {"grad_fn", t_grad_fn}, {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"set_grad_enabled", l_set_grad_enabled}, {"is_grad_enabled", l_is_grad_enabled},
  {NULL, NULL}
};

void lbbb_open_autograd(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, methods, funcs, NULL);
}
