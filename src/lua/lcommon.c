/*
** lcommon.c: what every binding file shares: tensor userdata and the one
** way a core status becomes a Lua error (argument checks: lcheck.c).
*/
#include <string.h>

#include "lua/lbbb.h"
#include "engine/runtime.h"

static const char *LAST_ERROR_KEY = "bbb.last_error";

/* ---- userdata, errors, GC pressure ---- */

lbbb_tensor_ud *lbbb_new_tensor(lua_State *L) {
  lbbb_tensor_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->t = NULL;
  luaL_setmetatable(L, BBB_TENSOR_MT);
  return u;
}

void lbbb_push_tensor(lua_State *L, bbb_tensor *t) {
  lbbb_tensor_ud *u = lbbb_new_tensor(L);
  bbb_tensor_retain(t);
  u->t = t;
}

/* Lua's collector sees only the small userdata; tell it about the bytes
** behind them so temporaries are freed at the pace they are made. The
** debt is handed over once the tensor bytes made since the last finished
** cycle reach a quarter of those live after it, as Lua paces its own heap
** against what survived: a training step that makes its temporaries in
** twenty allocations then pays for one cycle, not for one per allocation. */
#define GC_PAUSE_DIV 4

void lbbb_account(lua_State *L) {
  static int64_t seen, after_full, pending, live;
  int64_t now = bbb_bytes_allocated();
  if (now > seen + (1 << 16)) {
    pending += now - seen;
    seen = now;
    if (pending > live / GC_PAUSE_DIV) {
      int64_t kb = pending >> 10;
      pending = 0;
      if (lua_gc(L, LUA_GCSTEP, (int)(kb > (1 << 30) ? (1 << 30) : kb)))
        live = bbb_bytes_allocated();
    }
  } else if (now < seen) {
    seen = now;
  }
  /* A safety net for a host that switched the collector back to the
  ** generational mode, which forgets the debt: collect in full when tensor
  ** memory has more than doubled since the last full collection. */
  if (now > 2 * after_full + ((int64_t)64 << 20)) {
    lua_gc(L, LUA_GCCOLLECT);
    after_full = seen = bbb_bytes_allocated();
  }
}

/* The core words its messages "op: what" (or just "what"): a public
** function's error names it as bbb.op, as the argument checks do; an
** internal one's passes as it is. */
static void raise_core(lua_State *L, const char *msg) {
  const char *fn = lbbb_fname(L);
  if (strncmp(fn, "bbb.core.", 9) == 0) luaL_error(L, "%s", msg);
  size_t k = 0;
  while (msg[k] == '_' || (msg[k] >= 'a' && msg[k] <= 'z') || (k > 0 && msg[k] >= '0' && msg[k] <= '9')) k++;
  if (k > 0 && msg[k] == ':' && msg[k + 1] == ' ') luaL_error(L, "bbb.%s", msg);
  luaL_error(L, "%s: %s", fn, msg);
}

/* A loop cut short by Ctrl-C returns normally with partial results: the
** interrupt flag turns that into an error too. The kind of the last error
** is kept for last_error(). */
void lbbb_check(lua_State *L, int status) {
  /* The collector's step can free hundreds of megabytes: a Ctrl-C that
  ** lands during it is still this op's, not the interpreter hook's. */
  if (status == BBB_OK) lbbb_account(L);
  if (status == BBB_OK && bbb_interrupted()) {
    const char *fn = lbbb_fname(L);
    if (strncmp(fn, "bbb.core.", 9) == 0) status = bbb_error(BBB_EINTR, "%s: interrupted", fn + 9);
    else status = bbb_error(BBB_EINTR, "interrupted");
  }
  if (status != BBB_OK) {
    if (status == BBB_EINTR) {
      bbb_interrupt_clear();
      /* The interpreter's Ctrl-C hook (lua.c's lstop, which bbblua copies:
      ** every event, count 1) would raise a second "interrupted!" over this
      ** message at the next event; this error already serves it. */
      if (lua_gethookmask(L) == (LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT) &&
          lua_gethookcount(L) == 1)
        lua_sethook(L, NULL, 0, 0);
    }
    lua_pushstring(L, bbb_status_name(status));
    lua_setfield(L, LUA_REGISTRYINDEX, LAST_ERROR_KEY);
    raise_core(L, bbb_errmsg());
  }
}

/* last_error() -> kind, message of the last error a core function raised:
** kind is "shape", "argument", "index", "memory", "graph", "io", "value"
** or "interrupted"; nil when none has been raised. */
int lbbb_last_error(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LAST_ERROR_KEY);
  if (lua_isnil(L, -1)) return 1;
  lua_pushstring(L, bbb_errmsg());
  return 2;
}

int lbbb_result(lua_State *L, int status) {
  lbbb_check(L, status);
  return 1;
}
