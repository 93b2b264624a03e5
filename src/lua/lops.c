/*
** lops.c: the differentiable ops (src/engine/ops_*.c) as tensor methods,
** module functions and operators. The elementwise ops are registered from
** tables: one row per op, one wrapper per kind.
*/
#include <math.h>

#include "lua/lbbb.h"
#include "engine/ops.h"

static bbb_tensor *check(lua_State *L, int i) { return lbbb_check_tensor(L, i, "x"); }
#define push_result lbbb_result

static int unary_with(lua_State *L, int op, double p0, double p1) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_unary(&u->t, op, x, p0, p1));
}

/* The op code of a table-driven wrapper is its second upvalue (the first
** is its name). */
static int op_of(lua_State *L) { return (int)lua_tointeger(L, lua_upvalueindex(2)); }

static int t_unary(lua_State *L) { return unary_with(L, op_of(L), 0, 0); }

/** pow(x, p) -> tensor
** x to the power p (a finite number), elementwise; also x ^ p. */
static int t_pow(lua_State *L) {
  check(L, 1);
  return unary_with(L, BBB_POWS, lbbb_check_finite(L, 2, "p"), 0);
}

/** gt(x, s) -> tensor
** 1 where x > s, else 0 (a mask: no gradient flows through it). */
static int t_gt(lua_State *L) {
  check(L, 1);
  return unary_with(L, BBB_GTS, lbbb_check_number(L, 2, "s"), 0);
}
/** lt(x, s) -> tensor
** 1 where x < s, else 0 (a mask: no gradient flows through it). */
static int t_lt(lua_State *L) {
  check(L, 1);
  return unary_with(L, BBB_LTS, lbbb_check_number(L, 2, "s"), 0);
}

/** clamp(x [, lo [, hi]]) -> tensor
** x limited to [lo, hi] elementwise (nil: no bound). */
static int t_clamp(lua_State *L) {
  lua_settop(L, 3);
  check(L, 1);
  lua_Number lo = lua_isnil(L, 2) ? -HUGE_VAL : lbbb_check_number(L, 2, "lo");
  lua_Number hi = lua_isnil(L, 3) ? HUGE_VAL : lbbb_check_number(L, 3, "hi");
  if (isnan(lo)) return lbbb_argerror(L, 2, "lo", "expected a number, got nan");
  if (isnan(hi)) return lbbb_argerror(L, 3, "hi", "expected a number, got nan");
  if (lo > hi) return lbbb_argerror(L, 3, "hi", "expected a number >= lo (%f), got %f", lo, hi);
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
  if (na && nb) return lbbb_typeerror(L, 2, "b", "a tensor (a is a number)");
  if (na || nb) {
    bbb_tensor *x = na ? lbbb_check_tensor(L, 2, "b") : lbbb_check_tensor(L, 1, "a");
    lua_Number s = lua_tonumber(L, na ? 1 : 2);
    lbbb_tensor_ud *u = lbbb_new_tensor(L);
    return push_result(L, scalar_op(&u->t, op, x, s, na));
  }
  if (!luaL_testudata(L, 1, BBB_TENSOR_MT)) return lbbb_typeerror(L, 1, "a", "a tensor or a number");
  if (!luaL_testudata(L, 2, BBB_TENSOR_MT)) return lbbb_typeerror(L, 2, "b", "a tensor or a number");
  bbb_tensor *a = lbbb_check_tensor(L, 1, "a"), *b = lbbb_check_tensor(L, 2, "b");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_binary(&u->t, op, a, b));
}

static int t_binary(lua_State *L) { return arith(L, op_of(L)); }

static int t_unm(lua_State *L) { return unary_with(L, BBB_NEG, 0, 0); }

/* x ^ p: pow with a number exponent. */
static int t_pow_meta(lua_State *L) { return t_pow(L); }

/* sum([dim [, keepdim]]) and friends; no dim reduces everything. */
static int reduce(lua_State *L, int op) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lbbb_opt_dim(L, 2, x, -1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reduce(&u->t, op, x, dim, lua_toboolean(L, 3)));
}

static int t_reduce(lua_State *L) { return reduce(L, op_of(L)); }

/** argmax(x [, dim [, keepdim]]) -> tensor
** 1-based positions of the maxima, over all elements or along dim. */
static int t_argmax(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1);
  int dim = lbbb_opt_dim(L, 2, x, -1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_argmax(&u->t, x, dim, lua_toboolean(L, 3), 1));
}

/** max(x) -> tensor
** max(x, dim [, keepdim]) -> values, indices
** The largest element (0-d), or the maxima along dim with their 1-based
** positions. */
static int t_max(lua_State *L) {
  lua_settop(L, 3);
  reduce(L, BBB_MAX);
  if (lua_isnoneornil(L, 2)) return 1;
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  lbbb_check(L, bbb_argmax(&u->t, x, lbbb_check_dim(L, 2, x), lua_toboolean(L, 3), 1));
  return 2;
}

/** matmul(a, b [, ta [, tb]]) -> tensor
** The matrix product op(a) op(b) of 2-d tensors, op transposing when its flag
** is true (OpenBLAS sgemm).
** @usage
**   local a, b = bbb.ones(2, 3), bbb.ones(4, 3)
**   assert(bbb.matmul(a, b, false, true):size(2) == 4)   -- a b^T: (2, 4) */
static int t_matmul(lua_State *L) {
  lua_settop(L, 4);
  bbb_tensor *a = lbbb_check_tensor(L, 1, "a"), *b = lbbb_check_tensor(L, 2, "b");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_matmul(&u->t, a, b, lua_toboolean(L, 3), lua_toboolean(L, 4)));
}

/** linear(x, W [, b]) -> tensor
** x W^T + b for x (B, in), W (out, in), b (out): a dense layer's output.
** @usage
**   local x, W, b = bbb.ones(4, 3), bbb.ones(2, 3), bbb.zeros(2)
**   assert(bbb.linear(x, W, b):get(1, 1) == 3) */
static int t_linear(lua_State *L) {   /* linear(x, W [, b]) */
  lua_settop(L, 3);
  bbb_tensor *x = check(L, 1), *w = lbbb_check_tensor(L, 2, "W"), *b = lbbb_opt_tensor(L, 3, "b");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_linear(&u->t, x, w, b));
}

/* The optional dim of softmax and log_softmax: only the last dimension is
** supported, and any other is refused rather than ignored. */
static void check_last_dim(lua_State *L, int arg, const bbb_tensor *x) {
  if (lua_isnoneornil(L, arg) || x->ndim == 0) return;
  int d = lbbb_check_dim(L, arg, x);
  if (d != x->ndim - 1)
    lbbb_argerror(L, arg, "dim", "only the last dimension (%d or -1) is supported, got %I",
                  x->ndim, lua_tointeger(L, arg));
}

/** log_softmax(x [, dim]) -> tensor
** log softmax over the last dimension, computed stably (dim, if given, must
** name the last dimension). */
static int t_log_softmax(lua_State *L) {
  lua_settop(L, 2);
  bbb_tensor *x = check(L, 1);
  check_last_dim(L, 2, x);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_log_softmax(&u->t, x));
}

/** softmax(x [, dim]) -> tensor
** softmax over the last dimension (dim, if given, must name the last
** dimension).
** @usage
**   local p = bbb.tensor{ { 1, 2, 3 } }:softmax()
**   assert(math.abs(p:sum():item() - 1) < 1e-6) */
static int t_softmax(lua_State *L) {
  lua_settop(L, 2);
  bbb_tensor *x = check(L, 1);
  check_last_dim(L, 2, x);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_softmax(&u->t, x));
}

/** nll(logp, labels [, "mean" | "sum"]) -> tensor
** Negative log-likelihood of labels 1..C under log-probabilities logp (B, C),
** averaged (default) or summed over the batch. */
static int t_nll(lua_State *L) {
  lua_settop(L, 3);
  bbb_tensor *lp = lbbb_check_tensor(L, 1, "logp"), *lab = lbbb_check_tensor(L, 2, "labels");
  static const char *const modes[] = { "sum", "mean", NULL };
  int mean = lbbb_check_option(L, 3, "reduction", "mean", modes);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_nll(&u->t, lp, lab, 1, mean));
}

/** reshape(x, n1, n2, ...) -> tensor
** reshape(x, {n1, n2, ...}) -> tensor
** view(x, n1, n2, ...) -> tensor
** The same elements in new sizes (a view sharing storage); one size may be -1
** and is then inferred. view is another name for it.
** @usage
**   local x = bbb.arange(6):reshape(2, -1)
**   assert(x:size(2) == 3) */
static int t_reshape(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  int64_t shape[BBB_MAXDIM];
  int infer = -1;
  int nd = lbbb_check_sizes(L, 2, lua_gettop(L), shape, 1);
  for (int k = 0; k < nd; k++) {
    if (shape[k] != -1) continue;
    if (infer >= 0) return lbbb_argerror(L, 2, "sizes", "only one size may be -1");
    infer = k;
  }
  int64_t known = lbbb_sizes_numel(L, 2, nd, shape);
  if (infer >= 0) {
    char s[96];
    if (known == 0 || x->numel % known != 0)
      return lbbb_argerror(L, 2, "sizes", "cannot infer size %d: %s has %I elements, the "
                           "other sizes give %I", infer + 1, bbb_shape_str(x, s, sizeof s),
                           (lua_Integer)x->numel, (lua_Integer)known);
    shape[infer] = x->numel / known;
  }
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_reshape(&u->t, x, nd, shape));
}

/** narrow(x, dim, start, len) -> tensor
** Elements start .. start+len-1 (1-based) along dim. Along dimension 1 the
** result is a view (writes reach x); along other dimensions it is a copy.
** @usage
**   local x = bbb.arange(10):reshape(5, 2)
**   assert(x:narrow(1, 2, 3):size(1) == 3) */
static int t_narrow(lua_State *L) {   /* narrow(dim, start, len), start 1-based */
  lua_settop(L, 4);
  bbb_tensor *x = check(L, 1);
  int dim = lbbb_check_dim(L, 2, x);
  lua_Integer start = lbbb_check_integer(L, 3, "start"), len = lbbb_check_integer(L, 4, "len");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_narrow(&u->t, x, dim, start - 1, len));
}

/** index_select(x, idx) -> tensor
** The rows of x at the 1-based indices in the 1-d tensor idx.
** @usage
**   local x = bbb.arange(10):reshape(5, 2)
**   assert(x:index_select(bbb.tensor{ 5, 1 }):get(1, 1) == 8) */
static int t_index_select(lua_State *L) {
  bbb_tensor *x = check(L, 1), *idx = lbbb_check_tensor(L, 2, "idx");
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_index_select(&u->t, x, idx, 1));
}

/** t(x) -> tensor
** transpose(x [, dim1, dim2]) -> tensor
** The transpose of a 2-d tensor (a copy: writes do not reach x); dims, when
** given, must be its two (1 and 2, either way round, or -2 and -1). */
static int t_transpose(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  if (!lua_isnoneornil(L, 2) || !lua_isnoneornil(L, 3)) {
    int d1 = lbbb_check_dim(L, 2, x), d2 = lbbb_check_dim(L, 3, x);
    if (d1 == d2) return lbbb_argerror(L, 3, "dim2", "must differ from dim1");
  }
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_transpose(&u->t, x));
}

/** clone(x) -> tensor
** A copy of x's data; gradients flow back to x. */
static int t_clone(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_copy(&u->t, x));
}

/** detach(x) -> tensor
** x's data without its graph (shares storage; no gradient flows back). */
static int t_detach(lua_State *L) {
  bbb_tensor *x = check(L, 1);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_detach(&u->t, x));
}

/** cat({x1, x2, ...} [, dim]) -> tensor
** The tensors joined along dim (1 by default); other sizes must agree.
** @usage
**   assert(bbb.cat({ bbb.ones(2, 3), bbb.zeros(1, 3) }):size(1) == 3) */
static int t_cat(lua_State *L) {
  lua_settop(L, 2);
  lbbb_check_table(L, 1, "tensors");
  int n = (int)luaL_len(L, 1);
  if (n < 1) return lbbb_argerror(L, 1, "tensors", "expected a non-empty list of tensors, got an empty one");
  bbb_tensor **xs = lua_newuserdatauv(L, (size_t)n * sizeof *xs, 0);   /* GC-owned scratch */
  for (int k = 0; k < n; k++) {
    lua_geti(L, 1, k + 1);
    lbbb_tensor_ud *e = luaL_testudata(L, -1, BBB_TENSOR_MT);
    if (!e || !e->t)
      return lbbb_argerror(L, 1, "tensors", "entry %d is %s, not a tensor", k + 1,
                           e ? "a closed tensor" : lua_pushfstring(L, "a %s", luaL_typename(L, -1)));
    xs[k] = e->t;
    lua_pop(L, 1);
  }
  int dim = lbbb_opt_dim(L, 2, xs[0], 0);
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  return push_result(L, bbb_concat(&u->t, xs, n, dim));
}

/** exp(x) -> tensor
** log(x) -> tensor
** log1p(x) -> tensor
** softplus(x) -> tensor
** sigmoid(x) -> tensor
** tanh(x) -> tensor
** relu(x) -> tensor
** sqrt(x) -> tensor
** square(x) -> tensor
** abs(x) -> tensor
** neg(x) -> tensor
** Elementwise functions, each a tensor method and a bbb function
** (x:exp() or bbb.exp(x)), differentiable; softplus and sigmoid are stable
** for any input.
** @usage
**   local x = bbb.tensor{ -1000, 0, 1000 }
**   print(x:softplus())   -- 0, log 2, 1000: no overflow */

/** add(a, b) -> tensor
** sub(a, b) -> tensor
** mul(a, b) -> tensor
** div(a, b) -> tensor
** maximum(a, b) -> tensor
** minimum(a, b) -> tensor
** logaddexp(a, b) -> tensor
** Elementwise binary ops with NumPy broadcasting; either side may be a
** number. + - * / are the same ops. */

/** sum(x [, dim [, keepdim]]) -> tensor
** mean(x [, dim [, keepdim]]) -> tensor
** logsumexp(x [, dim [, keepdim]]) -> tensor
** Reductions over all elements (a 0-d result) or along dim (1-based).
** @usage
**   local x = bbb.tensor{ { 1, 2 }, { 3, 4 } }
**   assert(x:sum():item() == 10 and x:sum(1):get(2) == 6 and x:mean(2):get(1) == 1.5) */

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
  {"__unm", t_unm}, {"__pow", t_pow_meta}, {NULL, NULL}
};

void lbbb_open_ops(lua_State *L, const lbbb_tables *tb) {
  for (size_t k = 0; k < sizeof table_ops / sizeof table_ops[0]; k++) {
    lua_pushfstring(L, "bbb.%s", table_ops[k].name);
    lua_pushinteger(L, table_ops[k].op);
    lua_pushcclosure(L, table_ops[k].fn, 2);
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
