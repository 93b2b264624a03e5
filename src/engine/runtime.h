/*
** runtime.h: the bottom floor of the core: the error channel every core
** function reports through, and the interrupt flag a signal handler sets.
** It includes nothing of bbb, so tensor.c, autograd.c and parallel.c can all
** use it without including each other. Pure C: never includes lua.h.
*/
#ifndef BBB_RUNTIME_H
#define BBB_RUNTIME_H

/* Status codes: every core function that can fail returns one of these and
** leaves a message in bbb_errmsg(). Nothing in the core aborts or exits. */
typedef enum {
  BBB_OK = 0,
  BBB_ESHAPE,   /* shapes do not fit the op */
  BBB_EARG,     /* a bad argument value */
  BBB_EINDEX,   /* an index out of range */
  BBB_EMEM,     /* out of memory */
  BBB_EGRAPH,   /* autograd misuse */
  BBB_EIO,      /* file or format error */
  BBB_EVALUE,   /* non-finite value where a finite one is needed */
  BBB_EINTR,    /* interrupted by the user */
  BBB_STATUS_COUNT
} bbb_status;

/* Sets the message (printf format) and the status of the last error and
** returns status, so `return bbb_error(BBB_EARG, ...)` reports and fails. */
int bbb_error(int status, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
const char *bbb_errmsg(void);
/* The status of the last bbb_error() call: the kind behind a NULL from a
** function that returns a pointer (BBB_EMEM when none was set). */
int bbb_errstatus(void);
const char *bbb_status_name(int status);   /* "shape", "memory", ... */

/* Interrupts: a signal handler (the REPL's Ctrl-C) calls bbb_interrupt();
** parallel loops stop between slices once it is set, and the op that ran
** them reports BBB_EINTR. Async-signal-safe. */
void bbb_interrupt(void);
int bbb_interrupted(void);
void bbb_interrupt_clear(void);

#endif
