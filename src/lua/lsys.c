/*
** lsys.c: processes and folders without a shell (bbb.core.sys).
** Scripts that start workers or make output folders must never hand user
** text to /bin/sh: a path holding a newline, a quote or `$(...)` would run
** as a command. Here a process is started from an argument vector
** (fork and execvpe) and folders are made with mkdir(2), so no string is ever
** parsed as shell syntax.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lua/lbbb.h"
#include "io/wfile.h"

extern char **environ;

#define SPAWN_MAX_ARGS 4096

/* The child's environment: this process's, with opts.env's NAME = value
** pairs set (replacing a variable of the same name). Lives on the stack. */
static char **child_environ(lua_State *L, int opts) {
  lua_getfield(L, opts, "env");
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return environ; }
  if (!lua_istable(L, -1))
    luaL_error(L, "bbb.sys.spawn: argument 2 (options): env must be a table of NAME = value");
  int env = lua_gettop(L);
  size_t n = 0, extra = 0;
  while (environ[n] != NULL) n++;
  for (lua_pushnil(L); lua_next(L, env); lua_pop(L, 1)) extra++;
  char **envp = lua_newuserdatauv(L, (n + extra + 1) * sizeof *envp, 0);
  lua_createtable(L, (int)extra, 0);   /* anchors the NAME=value strings */
  int keep = lua_gettop(L);
  size_t k = 0;
  for (lua_pushnil(L); lua_next(L, env); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
      luaL_error(L, "bbb.sys.spawn: argument 2 (options): env must map names to strings");
    const char *name = lua_tostring(L, -2);
    if (*name == '\0' || strchr(name, '=') != NULL)
      luaL_error(L, "bbb.sys.spawn: argument 2 (options): env name '%s' is not a variable name", name);
    lua_pushfstring(L, "%s=%s", name, lua_tostring(L, -1));
    envp[k] = (char *)lua_tostring(L, -1);
    lua_rawseti(L, keep, (lua_Integer)k + 1);
    k++;
  }
  for (size_t i = 0; i < n; i++) {   /* then every inherited variable not replaced */
    const char *eq = strchr(environ[i], '=');
    size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < extra && !replaced; j++)
      replaced = strncmp(envp[j], environ[i], len) == 0 && envp[j][len] == '=';
    if (!replaced) envp[k++] = environ[i];
  }
  envp[k] = NULL;
  return envp;
}

/* The child's side of spawn: its folder and files set up, then the program.
** Only async-signal-safe calls between fork and exec. It dies with its
** parent (PR_SET_PDEATHSIG), whatever ends the parent, SIGKILL included;
** a parent gone before that was set is seen by getppid. An error before
** the program runs is written as errno on the pipe `report`. */
static void spawn_child(const char *const *argv, char **envp, const char *const paths[3],
                        const char *cwd, pid_t parent, int report) {
  int err = 0;
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
  if (cwd != NULL && chdir(cwd) != 0) err = errno;
  for (int fd = 0; fd < 3 && err == 0; fd++) {
    if (paths[fd] == NULL) continue;
    int f = open(paths[fd], fd == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (f < 0 || (f != fd && (dup2(f, fd) < 0 || close(f) != 0))) err = errno;
  }
  if (err == 0) {
    execvpe(argv[0], (char *const *)argv, envp);
    err = errno;
  }
  ssize_t w = write(report, &err, sizeof err);
  (void)w;
  _exit(127);
}

/* opts[key]: a string, nil (NULL), or an error naming what it must be. */
static const char *opt_string(lua_State *L, int opts, const char *key, const char *must) {
  if (!opts) return NULL;
  lua_getfield(L, opts, key);
  if (lua_type(L, -1) != LUA_TSTRING && !lua_isnil(L, -1))
    luaL_error(L, "bbb.sys.spawn: argument 2 (options): %s must be %s", key, must);
  const char *s = lua_tostring(L, -1);
  lua_pop(L, 1);   /* opts keeps the string alive */
  return s;
}

/* Forks and runs the child; -> its pid, or 0 with errno's reason in *err. */
static pid_t fork_exec(const char *const *argv, char **envp, const char *const paths[3],
                       const char *cwd, int *err) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) { *err = errno; return 0; }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) spawn_child(argv, envp, paths, cwd, parent, pipefd[1]);
  close(pipefd[1]);
  if (pid < 0) { *err = errno; close(pipefd[0]); return 0; }
  int child_err = 0;
  ssize_t r;
  do r = read(pipefd[0], &child_err, sizeof child_err); while (r < 0 && errno == EINTR);
  close(pipefd[0]);
  if (r == (ssize_t)sizeof child_err) {   /* the program never ran: collect the child */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    *err = child_err;
    return 0;
  }
  return pid;
}

/** sys.spawn(argv [, {stdin =, stdout =, stderr =, env =, cwd =}]) -> pid
** Starts argv[1] (looked up on PATH when it holds no '/') with the words of
** argv as its arguments, without a shell: no word is ever interpreted.
** stdout and stderr, when given, are files the child appends to; stdin a
** file it reads; env a table of NAME = value set for the child only;
** cwd the folder the child starts in (relative file names are resolved
** after changing to it). The child gets SIGTERM when this process ends,
** however it ends, so no worker outlives the program that started it.
** Returns the child's process id; sys.wait collects it. */
static int l_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int opts = lua_istable(L, 2) ? 2 : 0;
  if (!opts && !lua_isnoneornil(L, 2)) luaL_typeerror(L, 2, "table of options");
  lua_Integer n = luaL_len(L, 1);
  if (n < 1) return luaL_error(L, "bbb.sys.spawn: argument 1 (argv): needs at least the program");
  if (n > SPAWN_MAX_ARGS)
    return luaL_error(L, "bbb.sys.spawn: argument 1 (argv): %d words is more than %d", (int)n,
                      SPAWN_MAX_ARGS);
  /* argv lives in a userdata so an error below frees it with the stack. */
  const char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
  lua_createtable(L, (int)n, 0);   /* anchors the words while argv points at them */
  int words = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1))
      return luaL_error(L, "bbb.sys.spawn: argument 1 (argv): word %d is a %s, not a string", (int)i,
                        luaL_typename(L, -1));
    size_t len;
    argv[i - 1] = lua_tolstring(L, -1, &len);
    if (strlen(argv[i - 1]) != len)
      return luaL_error(L, "bbb.sys.spawn: argument 1 (argv): word %d holds a zero byte", (int)i);
    lua_rawseti(L, words, i);
  }
  argv[n] = NULL;
  const char *cwd = opt_string(L, opts, "cwd", "a folder name");
  const char *paths[3] = { opt_string(L, opts, "stdin", "a file name"),
                           opt_string(L, opts, "stdout", "a file name"),
                           opt_string(L, opts, "stderr", "a file name") };
  char **envp = opts ? child_environ(L, opts) : environ;
  int err = 0;
  pid_t pid = fork_exec(argv, envp, paths, cwd, &err);
  if (pid == 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot start '%s': %s", argv[0], strerror(err));
    return 2;
  }
  lua_pushinteger(L, pid);
  return 1;
}

/** sys.wait(pid [, nohang]) -> "exit"|"signal"|nil, code
** Waits for the child pid (or, with nohang, looks whether it has ended).
** Returns "exit" and its exit status, or "signal" and the signal number;
** nil while a nohang child still runs; nil and a message on an error. */
static int l_wait(lua_State *L) {
  pid_t pid = (pid_t)luaL_checkinteger(L, 1);
  int nohang = lua_toboolean(L, 2);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, nohang ? WNOHANG : 0);
  } while (r < 0 && errno == EINTR && !nohang);
  if (r == 0) return 0;
  if (r < 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  if (WIFSIGNALED(status)) {
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, WTERMSIG(status));
  } else {
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, WEXITSTATUS(status));
  }
  return 2;
}

/** sys.kill(pid [, signal]) -> true | nil, message
** Sends a signal (default SIGTERM) to the process pid. */
static int l_kill(lua_State *L) {
  pid_t pid = (pid_t)luaL_checkinteger(L, 1);
  int sig = (int)luaL_optinteger(L, 2, SIGTERM);
  if (pid <= 0) return luaL_error(L, "bbb.sys.kill: argument 1 (pid): must be > 0, got %d", (int)pid);
  if (kill(pid, sig) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/** sys.mkdir_p(path) -> true | nil, message
** Makes the folder path and any missing parents (mode 0777 less the umask),
** as `mkdir -p` would, but with mkdir(2): the path is never parsed. */
static int l_mkdir_p(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  if (len == 0) return luaL_error(L, "bbb.sys.mkdir_p: argument 1 (path): is empty");
  char *buf = lua_newuserdatauv(L, len + 1, 0);
  memcpy(buf, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (i < len && buf[i] != '/') continue;
    char keep = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
      lua_pushnil(L);
      lua_pushfstring(L, "cannot make folder '%s': %s", buf, strerror(errno));
      return 2;
    }
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
      lua_pushnil(L);
      lua_pushfstring(L, "cannot make folder '%s': a file of that name is in the way", buf);
      return 2;
    }
    buf[i] = keep;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/** sys.mkdtemp([prefix]) -> folder | nil, message
** A new folder of mode 0700 under $TMPDIR (or /tmp), named prefix
** followed by six random characters, made by mkdtemp(3): it never takes a
** name that exists, so no other process can have made it first or can
** look inside. The caller removes it. */
static int l_mkdtemp(lua_State *L) {
  const char *prefix = luaL_optstring(L, 1, "bbb-");
  if (strchr(prefix, '/') != NULL)
    return luaL_error(L, "bbb.sys.mkdtemp: argument 1 (prefix): holds a '/'");
  const char *base = getenv("TMPDIR");
  if (base == NULL || *base == '\0') base = "/tmp";
  lua_pushfstring(L, "%s/%sXXXXXX", base, prefix);
  size_t len;
  const char *tmpl = lua_tolstring(L, -1, &len);
  char *buf = lua_newuserdatauv(L, len + 1, 0);
  memcpy(buf, tmpl, len + 1);
  if (mkdtemp(buf) == NULL) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot make a temporary folder in '%s': %s", base, strerror(errno));
    return 2;
  }
  lua_pushstring(L, buf);
  return 1;
}

/** sys.pid() -> integer: this process's id. */
static int l_pid(lua_State *L) {
  lua_pushinteger(L, getpid());
  return 1;
}

/** sys.ppid() -> integer: the parent process's id (1 or a subreaper once
** the parent has died). */
static int l_ppid(lua_State *L) {
  lua_pushinteger(L, getppid());
  return 1;
}

/** sys.umask(mask) -> the previous mask: the permission bits that files
** and folders this process makes from now on will not have (0077: only
** the owner can read them). */
static int l_umask(lua_State *L) {
  lua_Integer m = luaL_checkinteger(L, 1);
  if (m < 0 || m > 0777) return luaL_error(L, "bbb.sys.umask: argument 1 (mask): must be in 0..0777");
  lua_pushinteger(L, umask((mode_t)m));
  return 1;
}

/** sys.kind(path [, follow]) -> "file"|"folder"|"fifo"|"device"|"socket"|"link"|nil
** What path is, without opening it (opening a FIFO would block), and
** without following a final symbolic link unless follow is true; nil when
** nothing is there. */
static int l_kind(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int follow = lua_toboolean(L, 2);
  struct stat st;
  if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) return 0;
  const char *k = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "folder"
                : S_ISFIFO(st.st_mode) ? "fifo" : S_ISLNK(st.st_mode) ? "link"
                : S_ISSOCK(st.st_mode) ? "socket" : "device";
  lua_pushstring(L, k);
  return 1;
}

/** sys.identity(path) -> string | nil
** "device:inode" of the file at path (links followed), or nil when there
** is none: two paths name one file exactly when their identities match. */
static int l_identity(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  lua_pushfstring(L, "%I:%I", (lua_Integer)st.st_dev, (lua_Integer)st.st_ino);
  return 1;
}

/** sys.fingerprint(path) -> string | nil
** "device:inode:size:mtime" of the file at path (links followed), the
** modification time to the nanosecond, or nil when there is none: a file
** replaced, appended to or rewritten between two calls gives two different
** strings, so a program that reads a file twice can tell it changed. */
static int l_fingerprint(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  lua_pushfstring(L, "%I:%I:%I:%I.%I", (lua_Integer)st.st_dev, (lua_Integer)st.st_ino, (lua_Integer)st.st_size,
                  (lua_Integer)st.st_mtim.tv_sec, (lua_Integer)st.st_mtim.tv_nsec);
  return 1;
}

/** sys.fnv1a(s) -> string
** The 32-bit FNV-1a hash of the bytes of s, as 8 hex digits: a short,
** stable name for a description (a grid's identity, a job's key, a prior
** file's text). Not for security. */
static int l_fnv1a(lua_State *L) {
  size_t n;
  const unsigned char *b = (const unsigned char *)luaL_checklstring(L, 1, &n);
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x01000193u;
  char out[9];
  snprintf(out, sizeof out, "%08x", (unsigned)h);
  lua_pushstring(L, out);
  return 1;
}

/** sys.nproc() -> integer
** The processors this process may run on. */
static int l_nproc(lua_State *L) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  lua_pushinteger(L, n > 0 ? n : 1);
  return 1;
}

/** sys.isatty(fd) -> boolean
** Whether file descriptor fd (0 stdin, 1 stdout, 2 stderr) is a terminal. */
static int l_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
  return 1;
}

/** sys.sleep(seconds)
** Sleeps for the given (fractional) seconds; a signal may end it early. */
static int l_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  if (!(s >= 0 && s < 1e6)) return luaL_error(L, "bbb.sys.sleep: argument 1 (seconds): must be in [0, 1e6)");
  struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
  nanosleep(&ts, NULL);
  return 0;
}

/** sys.find_program(name) -> path | nil
** The first executable file called name in the folders of PATH. */
static int l_find_program(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *path = getenv("PATH");
  if (strchr(name, '/') != NULL) {
    if (access(name, X_OK) == 0) { lua_pushstring(L, name); return 1; }
    return 0;
  }
  if (path == NULL || *name == '\0') return 0;
  luaL_Buffer b;
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t dl = end ? (size_t)(end - p) : strlen(p);
    if (dl > 0) {   /* an empty entry would mean the working folder: skipped */
      luaL_buffinit(L, &b);
      luaL_addlstring(&b, p, dl);
      luaL_addchar(&b, '/');
      luaL_addstring(&b, name);
      luaL_pushresult(&b);
      struct stat st;
      const char *cand = lua_tostring(L, -1);
      if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return 1;
      lua_pop(L, 1);
    }
    if (!end) break;
    p = end;
  }
  return 0;
}

#define LOCK_MT "bbb.FileLock"

typedef struct { int fd; } file_lock;

static int lock_release(lua_State *L) {
  file_lock *lk = luaL_checkudata(L, 1, LOCK_MT);
  if (lk->fd >= 0) { close(lk->fd); lk->fd = -1; }   /* closing drops the flock */
  return 0;
}

/** sys.lock(path) -> lock | nil, message
** Takes an exclusive advisory lock (flock) on path, creating the file when
** missing, without waiting: nil and a message when another process holds
** it. The lock lasts until lock:release(), the lock is collected, or the
** process ends. Two runs writing one log find each other this way. */
static int l_lock(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  file_lock *lk = lua_newuserdatauv(L, sizeof *lk, 0);
  lk->fd = -1;
  if (luaL_newmetatable(L, LOCK_MT)) {
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "__close");
    lua_newtable(L);
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "release");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot open '%s': %s", path, strerror(errno));
    return 2;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, err == EWOULDBLOCK ? "'%s' is being written by another run" : "cannot lock '%s': %s",
                    path, strerror(err));
    return 2;
  }
  lk->fd = fd;
  return 1;
}

/* write_file(path, text | {text, ...}) -> true | nil, message
** The text (or the pieces, in order) as the whole file at path or nothing:
** a temporary beside it, fsync, a rename over it. On failure the old file
** stays and the message names the file and the reason. */
static int l_write_file(lua_State *L) {
  const char *path = lbbb_check_path(L, 1, "path");
  int table = lua_istable(L, 2);
  if (!table) luaL_checktype(L, 2, LUA_TSTRING);
  int n = table ? (int)luaL_len(L, 2) : 1;
  luaL_checkstack(L, n + 2, "bbb.sys.write_file");
  const void **parts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *parts, 0);
  size_t *lens = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *lens, 0);
  for (int i = 0; i < n; i++) {   /* each piece stays on the stack, alive, until the write is done */
    if (!table) {
      parts[i] = lua_tolstring(L, 2, &lens[i]);
    } else if (lua_geti(L, 2, i + 1) != LUA_TSTRING) {
      return lbbb_argerror(L, 2, "text", "piece %d is a %s, not a string", i + 1, luaL_typename(L, -1));
    } else {
      parts[i] = lua_tolstring(L, -1, &lens[i]);
    }
  }
  if (bbb_write_atomic(path, parts, lens, n, "write") != BBB_OK) {
    lua_pushnil(L);
    lua_pushstring(L, bbb_errmsg());
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

void lbbb_open_sys(lua_State *L, const lbbb_tables *tb) {
  static const luaL_Reg funcs[] = {
    {"spawn", l_spawn}, {"wait", l_wait}, {"kill", l_kill}, {"mkdir_p", l_mkdir_p},
    {"kind", l_kind}, {"nproc", l_nproc}, {"isatty", l_isatty}, {"sleep", l_sleep},
    {"find_program", l_find_program}, {"lock", l_lock}, {"write_file", l_write_file},
    {"identity", l_identity}, {"fingerprint", l_fingerprint}, {"mkdtemp", l_mkdtemp}, {"pid", l_pid}, {"ppid", l_ppid}, {"umask", l_umask},
    {"fnv1a", l_fnv1a},
    {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  lua_setfield(L, tb->module, "sys");
}
