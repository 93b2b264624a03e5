/* bbblua_complete.h: tab completion for the REPL (bbblua_complete.c). */
#ifndef BBBLUA_COMPLETE_H
#define BBBLUA_COMPLETE_H

#include <lua.h>

/* Makes readline complete names through bbb.repl.complete on L. */
void bbblua_complete_init(lua_State *L);

#endif
