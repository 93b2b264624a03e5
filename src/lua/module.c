/*
** module.c: the entry point of bbb/core.so and of the interpreter's
** preloaded copy; the binding itself lives in the l*.c files.
*/
#include "lua/lbbb.h"

LUAMOD_API int luaopen_bbb_core(lua_State *L) { return lbbb_open(L); }
