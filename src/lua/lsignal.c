/*
** lsignal.c: SIGINT for long runs. While trapped, a first Ctrl-C only
** counts, so a training loop can finish its step and write a checkpoint; a
** second one restores the default disposition and re-raises the signal,
** so the process stops at once (status 130 in a shell).
*/
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <unistd.h>

#include "lbbb.h"

static volatile sig_atomic_t pending;
static struct sigaction previous;
static int trapped;

static void on_sigint(int sig) {
  if (++pending >= 2) {
    /* not the host's handler: an interpreter's would only set a flag */
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

/* sigint_trap(on): start or stop counting SIGINTs; returns the count so far */
static int l_sigint_trap(lua_State *L) {
  int on = lua_toboolean(L, 1);
  lua_pushinteger(L, pending);
  if (on && !trapped) {
    struct sigaction sa;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    pending = 0;
    if (sigaction(SIGINT, &sa, &previous) == 0) trapped = 1;
  } else if (!on && trapped) {
    sigaction(SIGINT, &previous, NULL);
    trapped = 0;
  }
  return 1;
}

static int l_sigint_pending(lua_State *L) {
  lua_pushinteger(L, pending);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"sigint_trap", l_sigint_trap}, {"sigint_pending", l_sigint_pending}, {NULL, NULL}
};

void lbbb_open_signal(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
