/*
** lbbb.h: what the binding files share: the userdata types, checking
** helpers, and the one way core errors become Lua errors.
*/
#ifndef LBBB_H
#define LBBB_H

#include <lua.h>
#include <lauxlib.h>

#include "tensor.h"
#include "rng.h"

#define BBB_TENSOR_MT "bbb.Tensor"
#define BBB_GENERATOR_MT "bbb.Generator"
#define BBB_SIZE_MT "bbb.Size"

typedef struct { bbb_tensor *t; } lbbb_tensor_ud;

/* Pushes a userdata holding NULL with the Tensor metatable: fill ->t after,
** so an error half way leaves nothing dangling. */
lbbb_tensor_ud *lbbb_new_tensor(lua_State *L);
/* Wraps t (which gains a reference) as a new userdata. */
void lbbb_push_tensor(lua_State *L, bbb_tensor *t);
bbb_tensor *lbbb_check_tensor(lua_State *L, int i);
bbb_tensor *lbbb_opt_tensor(lua_State *L, int i);   /* nil -> NULL */
bbb_rng *lbbb_check_generator(lua_State *L, int i);
/* The default generator (argument i if it is a Generator, else the
** module's own). */
bbb_rng *lbbb_generator_arg(lua_State *L, int i);

/* Turns a core status into a Lua error carrying bbb_errmsg(); returns on OK.
** Also tells the GC about tensor bytes allocated since the last call. */
void lbbb_check(lua_State *L, int status);
void lbbb_account(lua_State *L);
int lbbb_last_error(lua_State *L);   /* bbb.core.last_error() */

/* Reads a shape from a table at i, or from integers at i, i+1, ...;
** returns the number of dimensions. what names the caller in messages. */
int lbbb_get_shape(lua_State *L, int i, int64_t *shape, const char *what);
/* The same, admitting one -1 per size ("infer this one"). */
int lbbb_get_shape_infer(lua_State *L, int i, int64_t *shape, const char *what);
/* The product of the sizes (a -1 counts as 1), raising on overflow. */
int64_t lbbb_shape_numel(lua_State *L, int nd, const int64_t *shape, const char *what);

/* A 1-based dimension argument at i (negative counts from the end) as a
** 0-based dimension of t; op names the caller in messages. */
int lbbb_check_dim(lua_State *L, int i, const bbb_tensor *t, const char *op);

/* For a wrapper that pushed its result userdata before calling the core:
** raises on a bad status, else returns 1 (that userdata). */
int lbbb_result(lua_State *L, int status);

/* Where a binding file puts its functions: absolute stack indices of the
** module table, the Tensor methods table and the Tensor metatable. */
typedef struct { int module, methods, meta; } lbbb_tables;

/* methods become both t:name() and bbb.core.name(t); funcs are module
** functions only; meta are metamethods of bbb.Tensor. Any may be NULL. */
void lbbb_register(lua_State *L, const lbbb_tables *tb, const luaL_Reg *methods,
                   const luaL_Reg *funcs, const luaL_Reg *meta);

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

/* Monotonic wall-clock seconds (lruntime.c). */
double lbbb_now(void);

#endif
