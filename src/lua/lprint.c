/*
** lprint.c: __tostring of bbb.Tensor, laid out as Torch printed tensors.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua/lbbb.h"
#include "engine/autograd.h"

static void fmt_value(char *buf, size_t n, double v, int mode) {
  if (mode == 0) snprintf(buf, n, "%.0f", v);
  else if (mode == 1) snprintf(buf, n, "%.4f", v);
  else snprintf(buf, n, "%.4e", v);
}

/* What is shown of a large tensor: the first and last few matrices, rows
** and columns. Only those elements are read, so printing a 3000 x 3000
** tensor costs as much as printing a 7 x 8 one. */
#define MATS_MAX 6
#define MATS_EDGE 3
#define ROWS_MAX 20
#define ROWS_EDGE 3
#define COLS_MAX 12
#define COLS_EDGE 4

static int64_t next_shown(int64_t i, int64_t n, int64_t max, int64_t edge) {
  return (n > max && i == edge - 1) ? n - edge : i + 1;
}

typedef void (*visit_fn)(double v, void *ctx);

static void visit_shown(const bbb_tensor *t, visit_fn fn, void *ctx) {
  if (t->numel == 0) return;
  if (t->ndim == 0) { fn(bbb_data(t)[0], ctx); return; }
  int64_t c = t->shape[t->ndim - 1], r = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
  int64_t mats = t->numel / (r * c);
  if (t->ndim == 1) { r = c; c = 1; }   /* printed as a column */
  for (int64_t m = 0; m < mats; m = next_shown(m, mats, MATS_MAX, MATS_EDGE))
    for (int64_t i = 0; i < r; i = next_shown(i, r, ROWS_MAX, ROWS_EDGE))
      for (int64_t j = 0; j < c; j = next_shown(j, c, COLS_MAX, COLS_EDGE))
        fn(bbb_data(t)[(m * r + i) * c + j], ctx);
}

typedef struct { int ints; double mx, mn; int mode, width; } print_stats;

static void see_range(double v, void *c) {
  print_stats *p = c;
  double a = fabs(v);
  if (!isfinite(v)) return;
  if (v != floor(v) || a >= 1e9) p->ints = 0;
  if (a > p->mx) p->mx = a;
  if (a > 0 && a < p->mn) p->mn = a;
}

static void see_width(double v, void *c) {
  print_stats *p = c;
  char s[64];
  fmt_value(s, sizeof s, v, p->mode);
  if ((int)strlen(s) > p->width) p->width = (int)strlen(s);
}

/* mode 0: all integers, 1: fixed, 2: scientific; width of the widest. */
static print_stats shown_stats(const bbb_tensor *t) {
  print_stats p = { 1, 0, HUGE_VAL, 0, 1 };
  visit_shown(t, see_range, &p);
  p.mode = p.ints ? 0 : (p.mx >= 1e5 || p.mn < 1e-4) ? 2 : 1;
  visit_shown(t, see_width, &p);
  return p;
}

static void print_matrix(luaL_Buffer *b, const bbb_float *d, int64_t r, int64_t c, int mode, int width) {
  char s[64];
  int summ_r = r > ROWS_MAX, summ_c = c > COLS_MAX;
  for (int64_t i = 0; i < r; i++) {
    if (summ_r && i == ROWS_EDGE) { luaL_addstring(b, " ...\n"); i = r - ROWS_EDGE - 1; continue; }
    for (int64_t j = 0; j < c; j++) {
      if (summ_c && j == COLS_EDGE) { luaL_addstring(b, "  ..."); j = c - COLS_EDGE - 1; continue; }
      fmt_value(s, sizeof s, d[i * c + j], mode);
      luaL_addchar(b, ' ');
      for (int pad = width - (int)strlen(s); pad > 0; pad--) luaL_addchar(b, ' ');
      luaL_addstring(b, s);
    }
    luaL_addchar(b, '\n');
  }
}

static int t_tostring(lua_State *L) {
  lbbb_tensor_ud *u = luaL_testudata(L, 1, BBB_TENSOR_MT);
  if (!u) return lbbb_typeerror(L, 1, "x", "a tensor");
  if (!u->t) { lua_pushliteral(L, "[bbb.Tensor (closed)]"); return 1; }
  bbb_tensor *t = u->t;
  luaL_Buffer b;
  char s[128];
  print_stats ps = shown_stats(t);
  int mode = ps.mode, width = ps.width;
  luaL_buffinit(L, &b);
  if (t->ndim == 0) {
    fmt_value(s, sizeof s, bbb_data(t)[0], mode);
    luaL_addstring(&b, s);
    luaL_addchar(&b, '\n');
  } else if (t->numel > 0) {
    int64_t c = t->shape[t->ndim - 1], r = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    int64_t mats = t->numel / (r * c);
    for (int64_t m = 0; m < mats; m++) {
      if (mats > MATS_MAX && m == MATS_EDGE) {
        luaL_addstring(&b, "...\n\n");
        m = mats - MATS_EDGE - 1;
        continue;
      }
      if (t->ndim > 2) {   /* Torch's "(i,j,.,.) = " header */
        int64_t rest = m;
        char idx[96] = "";
        for (int d = t->ndim - 3; d >= 0; d--) {
          char part[24];
          snprintf(part, sizeof part, "%lld,%s", (long long)(rest % t->shape[d] + 1), idx);
          snprintf(idx, sizeof idx, "%s", part);
          rest /= t->shape[d];
        }
        snprintf(s, sizeof s, "(%s.,.) = \n", idx);
        luaL_addstring(&b, s);
      }
      if (t->ndim == 1) {   /* a column, as Torch prints vectors */
        print_matrix(&b, bbb_data(t), c, 1, mode, width);
      } else {
        print_matrix(&b, bbb_data(t) + m * r * c, r, c, mode, width);
      }
      if (t->ndim > 2 && m + 1 < mats) luaL_addchar(&b, '\n');
    }
  }
  luaL_addstring(&b, "[bbb.Tensor of size ");
  if (t->ndim == 0) luaL_addstring(&b, "()");
  for (int k = 0; k < t->ndim; k++) {
    snprintf(s, sizeof s, k ? "x%lld" : "%lld", (long long)t->shape[k]);
    luaL_addstring(&b, s);
  }
  const char *fn = bbb_grad_fn_name(t);
  if (fn) { luaL_addstring(&b, ", grad_fn="); luaL_addstring(&b, fn); }
  else if (bbb_tensor_requires_grad(t)) luaL_addstring(&b, ", requires_grad");
  luaL_addchar(&b, ']');
  luaL_pushresult(&b);
  return 1;
}

static const luaL_Reg meta[] = { {"__tostring", t_tostring}, {NULL, NULL} };

void lbbb_open_print(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, NULL, meta);
}
