/*
** lops.c: the differentiable ops (src/core/ops_*.c) as tensor methods,
** module functions and operators. The elementwise ops are registered from
** tables: one row per op, one wrapper per kind.
*/
#include <math.h>

#include "lbbb.h"
#include "ops.h"

static bbb_tensor *check(lua_State *L, int i) { return lbbb_check_tensor(L, i); }
#define check_dim lbbb_check_dim
#define push_result lbbb_result

static int unary_with(lua_State *L, int op, double p0, double p1) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_unary(&u->t, op, x, p0, p1));
}

/* The op code of a table-driven wrapper is its upvalue. */
static int op_of(lua_State *L) { return (int)lua_tointeger(L, lua_upvalueindex(1)); }

static int t_unary(lua_State *L) { return unary_with(L, op_of(L), 0, 0); }

static int t_pow(lua_State *L) {
  lua_Number p = luaL_checknumber(L, 2);
  if (!isfinite(p)) return luaL_error(L, "pow: exponent must be finite, got %f", p);
  return unary_with(L, BBB_POWS, p, 0);
}

/* t:gt(s), t:lt(s): 0/1 masks, constant for the gradient */
static int t_gt(lua_State *L) { return unary_with(L, BBB_GTS, luaL_checknumber(L, 2), 0); }
static int t_lt(lua_State *L) { return unary_with(L, BBB_LTS, luaL_checknumber(L, 2), 0); }

static int t_clamp(lua_State *L) {
  lua_settop(L, 3);
  lua_Number lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
  if (isnan(lo) || isnan(hi)) return luaL_error(L, "clamp: bounds must not be NaN");
  return unary_with(L, BBB_CLAMP, lo, hi);
}

/* x op s, or s op x when s_left: the scalar unary ops where there is one,
** else a 0-d tensor broadcast. */
static int scalar_op(bbb_tensor **out, int op, bbb_tensor *x, double s, int s_left) {
  switch (op) {
  case BBB_ADD: return bbb_unary(out, BBB_ADDS, x, s, 0);
  case BBB_MUL: return bbb_unary(out, BBB_MULS, x, s, 0);
  case BBB_SUB: return bbb_unary(out, s_left ? BBB_RSUBS : BBB_ADDS, x, s_left ? s : -s, 0);
  case BBB_DIV: return s_left ? bbb_unary(out, BBB_RDIVS, x, s, 0) : bbb_unary(out, BBB_MULS, x, 1.0 / s, 0);
  }
  bbb_tensor *c = bbb_tensor_full(0, NULL, (bbb_float)s);
  if (!c) return bbb_error(BBB_EMEM, "%s: out of memory", bbb_binary_names[op]);
  int st = s_left ? bbb_binary(out, op, c, x) : bbb_binary(out, op, x, c);
  bbb_tensor_release(c);
  return st;
}

/* a op b where either may be a number. */
static int arith(lua_State *L, int op) {
  int na = lua_type(L, 1) == LUA_TNUMBER, nb = lua_type(L, 2) == LUA_TNUMBER;
  if (na && nb) return luaL_error(L, "%s: needs a tensor operand", bbb_binary_names[op]);
  if (na || nb) {
    bbb_tensor *x = check(L, na ? 2 : 1);
    lua_Number s = lua_tonumber(L, na ? 1 : 2);
    lbbb_tensor_ud *u = lbbb_new_tensor(L);
    return push_result(L, scalar_op(&u->t, op, x, s, na));
  }
  bbb_tensor *a = check(L, 1), *b = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_binary(&u->t, op, a, b));
}

static int t_binary(lua_State *L) { return arith(L, op_of(L)); }

static int t_unm(lua_State *L) { return unary_with(L, BBB_NEG, 0, 0); }

/* sum([dim [, keepdim]]) and friends; no dim reduces everything. */
static int reduce(lua_State *L, int op) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lua_isnoneornil(L, 2) ? -1 : check_dim(L, 2, x, bbb_reduce_names[op]);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reduce(&u->t, op, x, dim, lua_toboolean(L, 3)));
}

static int t_reduce(lua_State *L) { return reduce(L, op_of(L)); }

static int t_argmax(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lua_isnoneornil(L, 2) ? -1 : check_dim(L, 2, x, "argmax");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_argmax(&u->t, x, dim, lua_toboolean(L, 3), 1));
}

/* max() -> value tensor; max(dim [, keepdim]) -> values, indices */
static int t_max(lua_State *L) {
  lua_settop(L, 3);
  reduce(L, BBB_MAX);
  if (lua_isnoneornil(L, 2)) return 1;
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_argmax(&u->t, x, check_dim(L, 2, x, "max"), lua_toboolean(L, 3), 1));
  return 2;
}

static int t_matmul(lua_State *L) {
  lua_settop(L, 4);
  bbb_tensor *a = check(L, 1), *b = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_matmul(&u->t, a, b, lua_toboolean(L, 3), lua_toboolean(L, 4)));
}

static int t_linear(lua_State *L) {   /* linear(x, W [, b]) */
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1), *w = check(L, 2), *b = lbbb_opt_tensor(L, 3);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_linear(&u->t, x, w, b));
}

static int t_log_softmax(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_log_softmax(&u->t, x));
}

static int t_softmax(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_softmax(&u->t, x));
}

/* nll(logp, labels [, "mean" | "sum"]): labels 1..C */
static int t_nll(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *lp = check(L, 1), *lab = check(L, 2);
  static const char *const modes[] = { "sum", "mean", NULL };
  int mean = luaL_checkoption(L, 3, "mean", modes);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_nll(&u->t, lp, lab, 1, mean));
}

static int t_reshape(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  int64_t shape[BBB_MAXDIM], known = 1;
  int infer = -1, nd = 0;
  /* sizes may include one -1, inferred from the element count */
  if (lua_istable(L, 2)) {
    nd = (int)luaL_len(L, 2);
    if (nd > BBB_MAXDIM) return luaL_error(L, "reshape: at most %d dimensions", BBB_MAXDIM);
    for (int k = 0; k < nd; k++) { lua_geti(L, 2, k + 1); shape[k] = lua_tointeger(L, -1); lua_pop(L, 1); }
  } else {
    while (lua_type(L, 2 + nd) == LUA_TNUMBER) {
      if (nd == BBB_MAXDIM) return luaL_error(L, "reshape: at most %d dimensions", BBB_MAXDIM);
      shape[nd] = lua_tointeger(L, 2 + nd); nd++;
    }
  }
  for (int k = 0; k < nd; k++) {
    if (shape[k] == -1 && infer >= 0) return luaL_error(L, "reshape: only one size may be -1");
    if (shape[k] == -1) infer = k;
    else if (shape[k] < 0) return luaL_error(L, "reshape: size %d is negative (%d)", k + 1, (int)shape[k]);
    else known *= shape[k];
  }
  if (infer >= 0) shape[infer] = known ? x->numel / known : 0;
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reshape(&u->t, x, nd, shape));
}

static int t_narrow(lua_State *L) {   /* narrow(dim, start, len), start 1-based */
  lua_settop(L, 4);
  bbb_tensor *x = check(L, 1);
  int dim = check_dim(L, 2, x, "narrow");
  lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_narrow(&u->t, x, dim, start - 1, len));
}

static int t_index_select(lua_State *L) {
  bbb_tensor *x = check(L, 1), *idx = check(L, 2);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_index_select(&u->t, x, idx, 1));
}

static int t_transpose(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_transpose(&u->t, x));
}

static int t_clone(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_copy(&u->t, x));
}

static int t_detach(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_detach(&u->t, x));
}

/* cat({t1, t2, ...} [, dim]) */
static int t_cat(lua_State *L) {
  lua_settop(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
  if (n < 1) return luaL_error(L, "cat: needs a non-empty list of tensors");
  bbb_tensor **xs = lua_newuserdatauv(L, (size_t)n * sizeof *xs, 0);   /* GC-owned scratch */
  for (int k = 0; k < n; k++) {
    lua_geti(L, 1, k + 1);
    lbbb_tensor_ud *e = luaL_testudata(L, -1, BBB_TENSOR_MT);
    if (!e || !e->t) return luaL_error(L, "cat: entry %d is a %s, not a tensor", k + 1, luaL_typename(L, -1));
    xs[k] = e->t;
    lua_pop(L, 1);
  }
  int dim = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, xs[0], "cat");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_concat(&u->t, xs, n, dim));
}

/* Table-driven ops: name, core op code, wrapper, and the metamethod it
** also serves (or NULL). */
static const struct {
  const char *name; int op; lua_CFunction fn; const char *meta;
} table_ops[] = {
  {"neg", BBB_NEG, t_unary, NULL}, {"exp", BBB_EXP, t_unary, NULL},
  {"log", BBB_LOG, t_unary, NULL}, {"log1p", BBB_LOG1P, t_unary, NULL},
  {"softplus", BBB_SOFTPLUS, t_unary, NULL}, {"sigmoid", BBB_SIGMOID, t_unary, NULL},
  {"tanh", BBB_TANH, t_unary, NULL}, {"relu", BBB_RELU, t_unary, NULL},
  {"sqrt", BBB_SQRT, t_unary, NULL}, {"square", BBB_SQUARE, t_unary, NULL},
  {"abs", BBB_ABS, t_unary, NULL},
  {"add", BBB_ADD, t_binary, "__add"}, {"sub", BBB_SUB, t_binary, "__sub"},
  {"mul", BBB_MUL, t_binary, "__mul"}, {"div", BBB_DIV, t_binary, "__div"},
  {"maximum", BBB_MAXIMUM, t_binary, NULL}, {"minimum", BBB_MINIMUM, t_binary, NULL},
  {"logaddexp", BBB_LOGADDEXP, t_binary, NULL},
  {"sum", BBB_SUM, t_reduce, NULL}, {"mean", BBB_MEAN, t_reduce, NULL},
  {"logsumexp", BBB_LOGSUMEXP, t_reduce, NULL},
};

static const luaL_Reg methods[] = {
  {"pow", t_pow}, {"clamp", t_clamp}, {"gt", t_gt}, {"lt", t_lt},
  {"max", t_max}, {"argmax", t_argmax}, {"matmul", t_matmul}, {"log_softmax", t_log_softmax},
  {"softmax", t_softmax}, {"reshape", t_reshape}, {"view", t_reshape},
  {"narrow", t_narrow}, {"index_select", t_index_select}, {"t", t_transpose},
  {"transpose", t_transpose}, {"clone", t_clone}, {"detach", t_detach},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"linear", t_linear}, {"nll", t_nll}, {"cat", t_cat}, {NULL, NULL}
};

static const luaL_Reg meta[] = {
  {"__unm", t_unm}, {NULL, NULL}
};

void lbbb_open_ops(lua_State *L, const lbbb_tables *tb) {
  for (size_t k = 0; k < sizeof table_ops / sizeof table_ops[0]; k++) {
    lua_pushinteger(L, table_ops[k].op);
    lua_pushcclosure(L, table_ops[k].fn, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, tb->methods, table_ops[k].name);
    if (table_ops[k].meta) {
      lua_pushvalue(L, -1);
      lua_setfield(L, tb->meta, table_ops[k].meta);
    }
    lua_setfield(L, tb->module, table_ops[k].name);
  }
  lbbb_register(L, tb, methods, funcs, meta);
}
