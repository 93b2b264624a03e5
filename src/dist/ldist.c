/*
** ldist.c: the module bbb.dist_mpi, a small binding of MPI for data-parallel
** training and distributed grid searches. It is built only when Open MPI is
** found, as its own module, so bbb.core stays free of MPI. Ranks are MPI's
** own, 0-based: rank 0 prints, logs and writes checkpoints.
**
** MPI is initialised on load. A script that ends normally calls finalize();
** a process that exits without it (a Lua error, os.exit) aborts the whole job
** from an atexit handler, so no other rank waits forever in a collective.
*/
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <lua.h>
#include <lauxlib.h>

#include "engine/tensor.h"
#include "lua/lbbb.h"

static int finalized, abort_code = 1;

static void at_exit(void) {
  int init = 0, fin = 0, size = 1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin || finalized) return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) MPI_Finalize();
  else MPI_Abort(MPI_COMM_WORLD, abort_code);
}

static void check(lua_State *L, int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  luaL_error(L, "dist.%s: %s", what, msg);
}

static void check_live(lua_State *L, const char *what) {
  if (finalized) luaL_error(L, "dist.%s: MPI was finalized", what);
}

static bbb_tensor *check_tensor(lua_State *L, int i) {
  lbbb_tensor_ud *u = luaL_checkudata(L, i, BBB_TENSOR_MT);
  if (!u->t) luaL_error(L, "tensor is closed");
  return u->t;
}

static int l_rank(lua_State *L) {
  int r = 0;
  check_live(L, "rank");
  check(L, MPI_Comm_rank(MPI_COMM_WORLD, &r), "rank");
  lua_pushinteger(L, r);
  return 1;
}

static int l_size(lua_State *L) {
  int n = 1;
  check_live(L, "size");
  check(L, MPI_Comm_size(MPI_COMM_WORLD, &n), "size");
  lua_pushinteger(L, n);
  return 1;
}

/* Sums n floats in place across ranks, in pieces MPI's int count can hold. */
static void sum_floats(lua_State *L, float *p, int64_t n, const char *what) {
  while (n > 0) {
    int k = n > INT_MAX ? INT_MAX : (int)n;
    check(L, MPI_Allreduce(MPI_IN_PLACE, p, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), what);
    p += k;
    n -= k;
  }
}

/* allreduce(t): t becomes the sum of every rank's t (in place); returns t */
static int l_allreduce(lua_State *L) {
  bbb_tensor *t = check_tensor(L, 1);
  check_live(L, "allreduce");
  sum_floats(L, bbb_data(t), t->numel, "allreduce");
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

static float *flat;
static int64_t flat_cap;

/* allreduce_flat({t1, t2, ...} [, extra]) -> summed extra: sums every
** tensor of the list across ranks through ONE flat buffer and one call,
** with the number extra riding along at its end (a flag every rank must
** agree on, such as a pending Ctrl-C). */
static int l_allreduce_flat(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Number extra = luaL_optnumber(L, 2, 0);
  check_live(L, "allreduce_flat");
  int n = (int)luaL_len(L, 1);
  int64_t total = 1;
  for (int i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    total += check_tensor(L, -1)->numel;
    lua_pop(L, 1);
  }
  if (total > flat_cap) {
    float *p = realloc(flat, (size_t)total * sizeof *p);
    if (!p) return luaL_error(L, "dist.allreduce_flat: out of memory for %I floats", (lua_Integer)total);
    flat = p;
    flat_cap = total;
  }
  int64_t at = 0;
  for (int i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    bbb_tensor *t = check_tensor(L, -1);
    memcpy(flat + at, bbb_data(t), (size_t)t->numel * sizeof *flat);
    at += t->numel;
    lua_pop(L, 1);
  }
  flat[at] = (float)extra;
  sum_floats(L, flat, total, "allreduce_flat");
  at = 0;
  for (int i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    bbb_tensor *t = check_tensor(L, -1);
    memcpy(bbb_data(t), flat + at, (size_t)t->numel * sizeof *flat);
    bbb_tensor_touch(t);
    at += t->numel;
    lua_pop(L, 1);
  }
  lua_pushnumber(L, flat[at]);
  return 1;
}

/* allreduce_numbers({a, b, ...}) -> {sums}: doubles, for figures of an epoch */
static int l_allreduce_numbers(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  check_live(L, "allreduce_numbers");
  int n = (int)luaL_len(L, 1);
  double *v = lua_newuserdatauv(L, sizeof *v * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    v[i] = luaL_checknumber(L, -1);
    lua_pop(L, 1);
  }
  check(L, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "allreduce_numbers");
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* allgather_number(x) -> {x of rank 0, x of rank 1, ...} */
static int l_allgather_number(lua_State *L) {
  double x = luaL_checknumber(L, 1);
  int n = 1;
  check_live(L, "allgather_number");
  check(L, MPI_Comm_size(MPI_COMM_WORLD, &n), "allgather_number");
  double *all = lua_newuserdatauv(L, sizeof *all * (size_t)n, 0);
  check(L, MPI_Allgather(&x, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD), "allgather_number");
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, all[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int check_root(lua_State *L, int i, const char *what) {
  lua_Integer root = luaL_checkinteger(L, i);
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (root < 0 || root >= n) luaL_error(L, "dist.%s: root must be a rank in 0..%d, got %I", what, n - 1, root);
  return (int)root;
}

/* broadcast(t, root): every rank's t becomes root's (same shape needed) */
static int l_broadcast(lua_State *L) {
  bbb_tensor *t = check_tensor(L, 1);
  int root = check_root(L, 2, "broadcast");
  check_live(L, "broadcast");
  long long n = t->numel, root_n = n;
  check(L, MPI_Bcast(&root_n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), "broadcast");
  if (root_n != n)
    return luaL_error(L, "dist.broadcast: this rank's tensor has %I elements, the root's %I",
                      (lua_Integer)n, (lua_Integer)root_n);
  float *p = bbb_data(t);
  while (n > 0) {
    int k = n > INT_MAX ? INT_MAX : (int)n;
    check(L, MPI_Bcast(p, k, MPI_FLOAT, root, MPI_COMM_WORLD), "broadcast");
    p += k;
    n -= k;
  }
  bbb_tensor_touch(t);
  lua_settop(L, 1);
  return 1;
}

/* broadcast_string(s, root) -> root's s on every rank */
static int l_broadcast_string(lua_State *L) {
  size_t len = 0;
  const char *s = lua_tolstring(L, 1, &len);
  int root = check_root(L, 2, "broadcast_string");
  int rank = 0;
  check_live(L, "broadcast_string");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == root && !s) return luaL_error(L, "dist.broadcast_string: the root must give a string");
  long long n = (long long)len;
  check(L, MPI_Bcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), "broadcast_string");
  if (n < 0 || n > INT_MAX) return luaL_error(L, "dist.broadcast_string: bad length");
  char *buf = lua_newuserdatauv(L, (size_t)n + 1, 0);
  if (rank == root) memcpy(buf, s, (size_t)n);
  check(L, MPI_Bcast(buf, (int)n, MPI_CHAR, root, MPI_COMM_WORLD), "broadcast_string");
  lua_pushlstring(L, buf, (size_t)n);
  return 1;
}

/* send_string(s, dest): a message to one rank (for work queues) */
static int l_send_string(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  int dest = check_root(L, 2, "send_string");
  check_live(L, "send_string");
  if (len > INT_MAX) return luaL_error(L, "dist.send_string: message too long");
  check(L, MPI_Send(s, (int)len, MPI_CHAR, dest, 0, MPI_COMM_WORLD), "send_string");
  return 0;
}

/* recv_string([source]) -> s, source: the next message from source, or from
** any rank when source is nil */
static int l_recv_string(lua_State *L) {
  int source = lua_isnoneornil(L, 1) ? MPI_ANY_SOURCE : check_root(L, 1, "recv_string");
  MPI_Status st;
  int len = 0;
  check_live(L, "recv_string");
  check(L, MPI_Probe(source, 0, MPI_COMM_WORLD, &st), "recv_string");
  check(L, MPI_Get_count(&st, MPI_CHAR, &len), "recv_string");
  char *buf = lua_newuserdatauv(L, (size_t)len + 1, 0);
  check(L, MPI_Recv(buf, len, MPI_CHAR, st.MPI_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv_string");
  lua_pushlstring(L, buf, (size_t)len);
  lua_pushinteger(L, st.MPI_SOURCE);
  return 2;
}

static int l_barrier(lua_State *L) {
  check_live(L, "barrier");
  check(L, MPI_Barrier(MPI_COMM_WORLD), "barrier");
  return 0;
}

static int l_finalize(lua_State *L) {
  if (!finalized) {
    finalized = 1;
    check(L, MPI_Finalize(), "finalize");
  }
  return 0;
}

/* abort([code]): stops every rank of the job */
static int l_abort(lua_State *L) {
  int code = (int)luaL_optinteger(L, 1, 1);
  if (!finalized) MPI_Abort(MPI_COMM_WORLD, code);
  return 0;
}

static int l_wtime(lua_State *L) {
  lua_pushnumber(L, MPI_Wtime());
  return 1;
}

static const luaL_Reg funcs[] = {
  {"rank", l_rank}, {"size", l_size}, {"allreduce", l_allreduce},
  {"allreduce_flat", l_allreduce_flat}, {"allreduce_numbers", l_allreduce_numbers},
  {"allgather_number", l_allgather_number}, {"broadcast", l_broadcast},
  {"broadcast_string", l_broadcast_string}, {"send_string", l_send_string},
  {"recv_string", l_recv_string}, {"barrier", l_barrier},
  {"finalize", l_finalize}, {"abort", l_abort}, {"wtime", l_wtime}, {NULL, NULL}
};

LUAMOD_API int luaopen_bbb_dist_mpi(lua_State *L) {
  int init = 0, provided = 0;
  MPI_Initialized(&init);
  if (!init) {
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return luaL_error(L, "dist: MPI_Init failed (code %d)", rc);
    atexit(at_exit);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  luaL_newlib(L, funcs);
  return 1;
}
