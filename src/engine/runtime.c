/*
** runtime.c: the error channel and the interrupt flag (see runtime.h).
*/
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>

#include "engine/runtime.h"

/* Per thread, so a message written inside a parallel region (or by another
** Lua state's thread) never overwrites the one being reported. */
static _Thread_local char errbuf[512];
static _Thread_local int errstatus;

int bbb_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errbuf, sizeof errbuf, fmt, ap);
  va_end(ap);
  errstatus = status;
  return status;
}

const char *bbb_errmsg(void) { return errbuf; }
int bbb_errstatus(void) { return errstatus ? errstatus : BBB_EMEM; }

static const char *const status_names[] = {
  "ok", "shape", "argument", "index", "memory", "graph", "io", "value", "interrupted"
};
_Static_assert(sizeof status_names / sizeof status_names[0] == BBB_STATUS_COUNT,
               "status_names must name every bbb_status");

const char *bbb_status_name(int status) {
  return status >= 0 && status < BBB_STATUS_COUNT ? status_names[status] : "unknown";
}

static volatile sig_atomic_t interrupt_flag;

void bbb_interrupt(void) { interrupt_flag = 1; }
int bbb_interrupted(void) { return interrupt_flag != 0; }
void bbb_interrupt_clear(void) { interrupt_flag = 0; }
