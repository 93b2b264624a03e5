/*
** lbbb.h: what the binding files share: the userdata types, checking
** helpers, and the one way core errors become Lua errors.
*/
#ifndef LBBB_H
#define LBBB_H

#include <lua.h>
#include <lauxlib.h>

#include "engine/tensor.h"
#include "engine/rng.h"
#include "bayes/bayes.h"

#define BBB_TENSOR_MT "bbb.Tensor"
#define BBB_GENERATOR_MT "bbb.Generator"
#define BBB_SIZE_MT "bbb.Size"

typedef struct { bbb_tensor *t; } lbbb_tensor_ud;

/* Pushes a userdata holding NULL with the Tensor metatable: fill ->t after,
** so an error half way leaves nothing dangling. */
lbbb_tensor_ud *lbbb_new_tensor(lua_State *L);
/* Wraps t (which gains a reference) as a new userdata. */
void lbbb_push_tensor(lua_State *L, bbb_tensor *t);
bbb_rng *lbbb_check_generator(lua_State *L, int i, const char *name);
/* The default generator (argument i if it is a Generator, else the
** module's own). */
bbb_rng *lbbb_generator_arg(lua_State *L, int i);
/* A C prior from a table {kind =, sigma =, pi =, sigma1 =, sigma2 =, b =}
** (lbayes.c); nil is no prior (kind none). */
bbb_prior lbbb_check_prior(lua_State *L, int arg);

/* Turns a core status into a Lua error carrying bbb_errmsg(); returns on OK.
** Also tells the GC about tensor bytes allocated since the last call. A
** public function's error reads "bbb.op: ..." (the core message's own op
** name gains "bbb.", a message without one gains the function's name). */
void lbbb_check(lua_State *L, int status);
void lbbb_account(lua_State *L);
int lbbb_last_error(lua_State *L);   /* bbb.core.last_error() */

/* ---- argument checks (lcheck.c), in the style of luaL_check*: each
** raises "bbb.fn: argument N (name): what was wrong", bbb.fn being the name
** the running function was registered under. Numbers are never converted
** from strings. */
const char *lbbb_fname(lua_State *L);   /* "bbb.sum", "bbb.core.st_save", ... */
int lbbb_argerror(lua_State *L, int arg, const char *name, const char *fmt, ...);
int lbbb_typeerror(lua_State *L, int arg, const char *name, const char *expected);
bbb_tensor *lbbb_check_tensor(lua_State *L, int arg, const char *name);
int lbbb_is_tensor(lua_State *L, int arg);   /* an open tensor */
bbb_tensor *lbbb_opt_tensor(lua_State *L, int arg, const char *name);   /* nil -> NULL */
lua_Number lbbb_check_number(lua_State *L, int arg, const char *name);
lua_Number lbbb_check_finite(lua_State *L, int arg, const char *name);
lua_Number lbbb_opt_finite(lua_State *L, int arg, const char *name, lua_Number def);
lua_Number lbbb_check_positive(lua_State *L, int arg, const char *name);   /* finite > 0 */
/* A number that fits float32: inf and NaN pass, 1e39 does not. */
bbb_float lbbb_check_float(lua_State *L, int arg, const char *name);
int lbbb_float_fits(lua_Number v);
lua_Integer lbbb_check_integer(lua_State *L, int arg, const char *name);
lua_Integer lbbb_check_int_range(lua_State *L, int arg, const char *name, lua_Integer lo,
                                 lua_Integer hi);
lua_Integer lbbb_opt_int_range(lua_State *L, int arg, const char *name, lua_Integer lo,
                               lua_Integer hi, lua_Integer def);
/* The index in list (NULL-terminated) of the string at arg; def when nil
** (NULL: required). */
int lbbb_check_option(lua_State *L, int arg, const char *name, const char *def,
                      const char *const list[]);
void lbbb_check_table(lua_State *L, int arg, const char *name);
/* A non-empty string without NUL bytes (which would name another file). */
const char *lbbb_check_path(lua_State *L, int arg, const char *name);
/* Sizes (argument name "sizes"): one table at arg, or integers at arg..last
** (none when arg > last: a 0-d shape). infer admits -1 sizes. Returns the
** number of dimensions. */
int lbbb_check_sizes(lua_State *L, int arg, int last, int64_t *shape, int infer);
/* The product of the sizes (a -1 counts as 1), raising on overflow. */
int64_t lbbb_sizes_numel(lua_State *L, int arg, int nd, const int64_t *shape);
/* A 1-based dimension of t at arg (negative counts from the end), returned
** 0-based; the opt form gives def for nil. */
int lbbb_check_dim(lua_State *L, int arg, const bbb_tensor *t);
int lbbb_opt_dim(lua_State *L, int arg, const bbb_tensor *t, int def);

/* For a wrapper that pushed its result userdata before calling the core:
** raises on a bad status, else returns 1 (that userdata). */
int lbbb_result(lua_State *L, int status);

/* Where a binding file puts its functions: absolute stack indices of the
** module table, the Tensor methods table and the Tensor metatable. */
typedef struct { int module, methods, meta; } lbbb_tables;

/* methods become both t:name() and bbb.core.name(t); funcs are module
** functions only; meta are metamethods of bbb.Tensor. Any may be NULL.
** Each function is a closure whose first upvalue is the name its errors
** give: "bbb.name" (metamethods "bbb.Tensor.__name"). */
void lbbb_register(lua_State *L, const lbbb_tables *tb, const luaL_Reg *methods,
                   const luaL_Reg *funcs, const luaL_Reg *meta);
/* The same for functions bbb's Lua library calls and users do not: named
** "bbb.core.name", and a core error passes through them unchanged (the
** library words it for its own caller). */
void lbbb_register_internal(lua_State *L, const lbbb_tables *tb, const luaL_Reg *funcs);
/* Pushes f as a closure named name (its first upvalue), with the nup values
** on top of the stack as its further upvalues. */
void lbbb_pushfunction(lua_State *L, lua_CFunction f, const char *name, int nup);

/* luaopen_bbb_core: calls each file's opener below, in this order. */
int lbbb_open(lua_State *L);
void lbbb_open_tensor(lua_State *L, const lbbb_tables *tb);    /* ltensor.c */
void lbbb_open_ops(lua_State *L, const lbbb_tables *tb);       /* lops.c */
void lbbb_open_autograd(lua_State *L, const lbbb_tables *tb);  /* lautograd.c */
void lbbb_open_print(lua_State *L, const lbbb_tables *tb);     /* lprint.c */
void lbbb_open_runtime(lua_State *L, const lbbb_tables *tb);   /* lruntime.c */
void lbbb_open_rng(lua_State *L, const lbbb_tables *tb);       /* lrng.c */
void lbbb_open_bayes(lua_State *L, const lbbb_tables *tb);     /* lbayes.c */
void lbbb_open_optim(lua_State *L, const lbbb_tables *tb);     /* loptim.c */
void lbbb_open_io(lua_State *L, const lbbb_tables *tb);        /* lio.c */
void lbbb_open_help(lua_State *L, const lbbb_tables *tb);      /* lhelp.c */
void lbbb_open_checkpoint(lua_State *L, const lbbb_tables *tb); /* lcheckpoint.c */
void lbbb_open_signal(lua_State *L, const lbbb_tables *tb);    /* lsignal.c */
void lbbb_open_rdata(lua_State *L, const lbbb_tables *tb);     /* lrdata.c */
void lbbb_open_sys(lua_State *L, const lbbb_tables *tb);       /* lsys.c */
void lbbb_open_conv(lua_State *L, const lbbb_tables *tb);      /* lconv.c */
void lbbb_open_csv(lua_State *L, const lbbb_tables *tb);       /* lcsv.c */
void lbbb_open_mlp(lua_State *L, const lbbb_tables *tb);       /* lmlp.c */
void lbbb_open_linalg(lua_State *L, const lbbb_tables *tb);    /* llinalg.c */
void lbbb_open_vec(lua_State *L, const lbbb_tables *tb);       /* lvec.c */

#endif
