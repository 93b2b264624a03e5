/*
** test_interrupt.c: an interrupt request stops long core loops. With the
** flag set, a parallel pass returns early and the op reports BBB_EINTR;
** cleared, the same op runs to the end and gives the full result.
*/
#include <stdio.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/parallel.h"

static int passed, failed;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (ok) passed++; else failed++;
}

int main(void) {
  int64_t shape[1] = { 1 << 22 };
  bbb_tensor *x = bbb_tensor_full(1, shape, 2.0f), *y = NULL;
  check(x != NULL, "a 4M-element tensor");

  bbb_interrupt();
  int st = bbb_unary(&y, BBB_EXP, x, 0, 0);
  check(st == BBB_EINTR && y == NULL, "exp under an interrupt reports BBB_EINTR and no result");
  st = bbb_reduce(&y, BBB_SUM, x, -1, 0);
  check(st == BBB_OK || st == BBB_EINTR, "a whole-tensor sum under an interrupt returns");
  bbb_tensor_release(y);
  y = NULL;

  bbb_interrupt_clear();
  st = bbb_unary(&y, BBB_SQUARE, x, 0, 0);
  int all = st == BBB_OK;
  for (int64_t i = 0; all && i < shape[0]; i++) all = bbb_data(y)[i] == 4.0f;
  check(all, "after clearing, square covers every element");
  bbb_tensor_release(y);

  /* backward stops between nodes */
  bbb_tensor *p = bbb_tensor_full(1, shape, 1.0f), *a = NULL, *b = NULL;
  bbb_requires_grad(p, 1);
  bbb_unary(&a, BBB_EXP, p, 0, 0);
  bbb_reduce(&b, BBB_SUM, a, -1, 0);
  bbb_interrupt();
  st = bbb_backward(b, NULL, 0);
  check(st == BBB_EINTR, "backward under an interrupt reports BBB_EINTR");
  bbb_interrupt_clear();
  bbb_tensor_release(a); bbb_tensor_release(b); bbb_tensor_release(p); bbb_tensor_release(x);

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
