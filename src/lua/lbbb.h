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

/* Reads a shape from a table at i, or from integers at i, i+1, ...;
** returns the number of dimensions. what names the caller in messages. */
int lbbb_get_shape(lua_State *L, int i, int64_t *shape, const char *what);

int lbbb_open(lua_State *L);
void lbbb_open_tensor(lua_State *L);      /* fills the table on top */
void lbbb_open_generator(lua_State *L);
void lbbb_open_bayes(lua_State *L);
void lbbb_open_bench(lua_State *L);       /* timing helpers for the benchmarks */
void lbbb_open_rdata(lua_State *L);       /* R data frames of factors */

#endif
