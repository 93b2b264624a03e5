/*
** lsignal.c: SIGINT, SIGTERM, SIGHUP and SIGQUIT for long runs. While trapped, a
** first signal only counts, so a training loop can finish its step and
** write a checkpoint (`kill` or a closed terminal loses no more than Ctrl-C
** does); a second one restores the default disposition and re-raises it,
** so the process stops at once (status 128 + the signal in a shell).
*/
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <unistd.h>

#include "lua/lbbb.h"

static const int trapped_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define N_TRAPPED (sizeof trapped_signals / sizeof trapped_signals[0])

static volatile sig_atomic_t pending;
static volatile sig_atomic_t first_signal;
static struct sigaction previous[N_TRAPPED];
static int trapped;

static void on_signal(int sig) {
  if (first_signal == 0) first_signal = sig;
  if (++pending >= 2) {
    /* not the host's handler: an interpreter's would only set a flag */
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

/* sigint_trap(on): start or stop counting SIGINT, SIGTERM, SIGHUP and SIGQUIT;
** returns the count so far */
static int l_sigint_trap(lua_State *L) {
  int on = lua_toboolean(L, 1);
  lua_pushinteger(L, pending);
  if (on && !trapped) {
    struct sigaction sa;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    pending = 0;
    first_signal = 0;
    for (size_t k = 0; k < N_TRAPPED; k++) sigaction(trapped_signals[k], &sa, &previous[k]);
    trapped = 1;
  } else if (!on && trapped) {
    for (size_t k = 0; k < N_TRAPPED; k++) sigaction(trapped_signals[k], &previous[k], NULL);
    trapped = 0;
  }
  return 1;
}

static int l_sigint_pending(lua_State *L) {
  lua_pushinteger(L, pending);
  return 1;
}

/* interrupt_signal() -> the number of the first signal counted (2 SIGINT,
** 15 SIGTERM, 1 SIGHUP, 3 SIGQUIT), or 0 */
static int l_interrupt_signal(lua_State *L) {
  lua_pushinteger(L, first_signal);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"sigint_trap", l_sigint_trap}, {"sigint_pending", l_sigint_pending},
  {"interrupt_signal", l_interrupt_signal}, {NULL, NULL}
};

void lbbb_open_signal(lua_State *L, const lbbb_tables *tb) {
  lbbb_register_internal(L, tb, funcs);
}
