/*
** lprint.c: __tostring of bbb.Tensor, laid out as Torch printed tensors.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lbbb.h"
#include "autograd.h"

static void fmt_value(char *buf, size_t n, double v, int mode) {
  if (mode == 0) snprintf(buf, n, "%.0f", v);
  else if (mode == 1) snprintf(buf, n, "%.4f", v);
  else snprintf(buf, n, "%.4e", v);
}

/* 0: all integers, 1: fixed, 2: scientific. */
static int fmt_mode(const bbb_tensor *t) {
  int ints = 1;
  double mx = 0, mn = HUGE_VAL;
  for (int64_t i = 0; i < t->numel; i++) {
    double v = bbb_data(t)[i], a = fabs(v);
    if (!isfinite(v)) continue;
    if (v != floor(v) || a >= 1e9) ints = 0;
    if (a > mx) mx = a;
    if (a > 0 && a < mn) mn = a;
  }
  if (ints) return 0;
  return (mx >= 1e5 || mn < 1e-4) ? 2 : 1;
}

static void print_matrix(luaL_Buffer *b, const bbb_float *d, int64_t r, int64_t c, int mode, int width) {
  char s[64];
  int summ_r = r > 20, summ_c = c > 12;
  for (int64_t i = 0; i < r; i++) {
    if (summ_r && i == 3) { luaL_addstring(b, " ...\n"); i = r - 4; continue; }
    for (int64_t j = 0; j < c; j++) {
      if (summ_c && j == 4) { luaL_addstring(b, "  ..."); j = c - 5; continue; }
      fmt_value(s, sizeof s, d[i * c + j], mode);
      luaL_addchar(b, ' ');
      for (int pad = width - (int)strlen(s); pad > 0; pad--) luaL_addchar(b, ' ');
      luaL_addstring(b, s);
    }
    luaL_addchar(b, '\n');
  }
}

static int t_tostring(lua_State *L) {
  lbbb_tensor_ud *u = luaL_checkudata(L, 1, BBB_TENSOR_MT);
  if (!u->t) { lua_pushliteral(L, "[bbb.Tensor (closed)]"); return 1; }
  bbb_tensor *t = u->t;
  luaL_Buffer b;
  char s[128];
  int mode = fmt_mode(t), width = 1;
  for (int64_t i = 0; i < t->numel; i++) {
    fmt_value(s, sizeof s, bbb_data(t)[i], mode);
    if ((int)strlen(s) > width) width = (int)strlen(s);
  }
  luaL_buffinit(L, &b);
  if (t->ndim == 0) {
    fmt_value(s, sizeof s, bbb_data(t)[0], mode);
    luaL_addstring(&b, s);
    luaL_addchar(&b, '\n');
  } else if (t->numel > 0) {
    int64_t c = t->shape[t->ndim - 1], r = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    int64_t mats = t->numel / (r * c);
    for (int64_t m = 0; m < mats; m++) {
      if (mats > 6 && m == 3) { luaL_addstring(&b, "...\n\n"); m = mats - 4; continue; }
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
  if (t->node) { luaL_addstring(&b, ", grad_fn="); luaL_addstring(&b, t->node->op); }
  else if (t->requires_grad) luaL_addstring(&b, ", requires_grad");
  luaL_addchar(&b, ']');
  luaL_pushresult(&b);
  return 1;
}

static const luaL_Reg meta[] = { {"__tostring", t_tostring}, {NULL, NULL} };

void lbbb_open_print(lua_State *L, const lbbb_tables *tb) {
  lbbb_register(L, tb, NULL, NULL, meta);
}
