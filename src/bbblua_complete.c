/*
 * bbblua_complete.c: tab completion for bbblua's REPL. readline hands over
 * the word before the cursor (a chain like `bbb.ze` or `x:so`: '.' and ':'
 * do not break words); bbb.repl.complete lists what can follow.
 */

#if defined(BBB_USE_READLINE)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <readline/readline.h>

#include "bbblua_complete.h"

static lua_State *complete_L = NULL;

/* Calls bbb.repl.complete(text) and copies the results (NULL-terminated,
 * malloc'ed as readline wants); NULL when there is nothing. */
static int call_complete(lua_State *L) {
  const char *text = lua_tostring(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "bbb.app.repl");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "complete");
  lua_pushstring(L, text);
  lua_call(L, 1, 1);
  return 1;
}

static char **complete(const char *text, int start, int end) {
  lua_State *L = complete_L;
  char **matches = NULL;
  (void)start; (void)end;
  rl_attempted_completion_over = 1;   /* no file names */
  if (L == NULL) return NULL;
  int top = lua_gettop(L);
  lua_pushcfunction(L, call_complete);
  lua_pushstring(L, text);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    if (n > 0 && (matches = calloc((size_t)n + 2, sizeof *matches)) != NULL) {
      /* matches[0] is the longest common prefix, as readline expects */
      size_t common = (size_t)-1;
      const char *first = NULL;
      for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, -1, i);
        const char *s = lua_tostring(L, -1);
        matches[i] = strdup(s ? s : "");
        if (first == NULL) first = matches[i];
        size_t k = 0;
        while (first[k] && first[k] == matches[i][k]) k++;
        if (k < common) common = k;
        lua_pop(L, 1);
      }
      matches[0] = strndup(first, common);
    }
  }
  lua_settop(L, top);
  return matches;
}

void bbblua_complete_init(lua_State *L) {
  complete_L = L;
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = " \t\n\"\\'`@$><=;|&{(+-*/%^~#,[]";
  rl_completion_append_character = '\0';
}

#else

#include "bbblua_complete.h"
void bbblua_complete_init(lua_State *L) { (void)L; }

#endif
