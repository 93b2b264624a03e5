/*
 * bbblua: the Lua 5.4 interpreter with bbb preloaded.
 *
 * Modelled on Lua's own lua.c: same options, same `arg` table, same error
 * reporting with a traceback, same Ctrl-C hook. On top of it: package.path
 * points at the bbb Lua library, `bbb` is a global, and the REPL has
 * persistent readline history and a Ctrl-C at the prompt that only clears
 * the line.
 */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#if defined(BBB_USE_READLINE)
#include <readline/readline.h>
#include <readline/history.h>
#endif

#include "bbblua_complete.h"
#include "engine/runtime.h"

int luaopen_bbb_core(lua_State *L);
int luaopen_bbb_bench(lua_State *L);

#ifndef BBB_VERSION
#ifndef BBB_VERSION
#error "BBB_VERSION comes from CMakeLists.txt (project VERSION)"
#endif
#endif

/* Relative fallback, for a manual build run from the repository root. */
#ifndef BBB_LUA_DIR
#define BBB_LUA_DIR "lua"
#endif

#define PROMPT1 "> "
#define PROMPT2 ">> "
#define HISTORY_MAX_LINES 1000

#define INIT_VAR "LUA_INIT"
#define INIT_VAR_VERSION INIT_VAR "_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR

/* Results of reading a line; negative so they never clash with a Lua status. */
enum { INPUT_OK = 0, INPUT_EOF = -1, INPUT_INTERRUPTED = -2 };

static const char *progname = "bbblua";
static lua_State *globalL = NULL;
static volatile sig_atomic_t prompt_interrupted = 0;


/* ---------------------------------------------------------------- signals */

/* No SA_RESTART: a Ctrl-C must break a blocking read so the REPL sees it. */
static void set_sigint(void (*handler)(int), struct sigaction *old) {
  struct sigaction sa;
  sa.sa_handler = handler;
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, old);
}

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

/*
 * Only a hook and a flag are safe to set from a signal handler. The hook
 * raises the error at the next Lua instruction; the flag stops bbb's long C
 * loops, which check it between slices. The handler stays installed, so a
 * second Ctrl-C only repeats the request and never ends the session.
 */
static void laction(int sig) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  (void)sig;
  bbb_interrupt();
  lua_sethook(globalL, lstop, flag, 1);
}

static void on_prompt_sigint(int sig) {
  (void)sig;
  prompt_interrupted = 1;
}


/* ------------------------------------------------------ running and errors */

static void l_message(const char *pname, const char *msg) {
  if (pname) fprintf(stderr, "%s: ", pname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    l_message(progname, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* A script's error, as its user reads it: the message without the
** "file.lua:N: " positions that each error() passing it on put in front,
** and no traceback; BBB_DEBUG=1 keeps both (msghandler). */
static int script_msghandler(lua_State *L) {
  const char *debug = getenv("BBB_DEBUG");
  if ((debug && strcmp(debug, "1") == 0) || lua_type(L, 1) != LUA_TSTRING) return msghandler(L);
  lua_settop(L, 1);
  for (;;) {   /* msg:gsub("^[^\n]-%.lua:%d+: ", "") until nothing changes */
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "gsub");
    lua_pushvalue(L, 1);
    lua_pushliteral(L, "^[^\n]-%.lua:%d+: ");
    lua_pushliteral(L, "");
    lua_call(L, 3, 2);
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_replace(L, 1);
    lua_settop(L, 1);
    if (n == 0) return 1;
  }
}

static int docall_with(lua_State *L, int narg, int nres, lua_CFunction handler) {
  int status;
  int base = lua_gettop(L) - narg;
  struct sigaction old;
  lua_pushcfunction(L, handler);
  lua_insert(L, base);
  globalL = L;
  set_sigint(laction, &old);
  status = lua_pcall(L, narg, nres, base);
  sigaction(SIGINT, &old, NULL);
  /* A Ctrl-C that landed after the chunk ended must not hit the next one. */
  if (lua_gethook(L) == lstop) lua_sethook(L, NULL, 0, 0);
  bbb_interrupt_clear();
  lua_remove(L, base);
  return status;
}

static int docall(lua_State *L, int narg, int nres) {
  return docall_with(L, narg, nres, msghandler);
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dofile(lua_State *L, const char *name) {
  return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}


/* -------------------------------------------------------------- bbb setup */

/*
 * The library's folder: $BBB_LUA_DIR; else an installed one next to this
 * executable: <bin>/BBB_LUA_DIR_FROM_BIN (cmake --install) or
 * <bin>/../share/lua/5.4 (a luarocks tree, whose files move after the
 * build); else the source tree's lua/ this bbblua was built from.
 */
static const char *lua_dir(char *buf, size_t n) {
  const char *dir = getenv("BBB_LUA_DIR");
  char exe[4096];
  ssize_t len;
  if (dir != NULL && dir[0] != '\0') return dir;
  len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    static const char *const rel[] = {
#ifdef BBB_LUA_DIR_FROM_BIN
      BBB_LUA_DIR_FROM_BIN,
#endif
      "../share/lua/5.4",
    };
    char *slash;
    exe[len] = '\0';
    slash = strrchr(exe, '/');
    if (slash != NULL) *slash = '\0';
    for (size_t i = 0; slash != NULL && i < sizeof rel / sizeof rel[0]; i++) {
      snprintf(buf, n, "%s/%s/bbb/init.lua", exe, rel[i]);
      if (access(buf, R_OK) == 0) {
        snprintf(buf, n, "%s/%s", exe, rel[i]);
        return buf;
      }
    }
  }
  return BBB_LUA_DIR;
}

/* Pushes the templates of search path `path` that are absolute: a script
** run by bbblua never loads a module from the working folder ("./?.lua"),
** where anyone who can write a file could plant one. */
static void push_absolute_templates(lua_State *L, const char *path) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int first = 1;
  for (const char *p = path; *p != '\0';) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && p[0] == '/') {
      if (!first) luaL_addchar(&b, ';');
      luaL_addlstring(&b, p, len);
      first = 0;
    }
    p += len + (end != NULL);
  }
  luaL_pushresult(&b);
}

static void prepend_lua_dir(lua_State *L) {
  char buf[4200];
  const char *dir = lua_dir(buf, sizeof buf);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  push_absolute_templates(L, lua_tostring(L, -1));
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -4, "path");
  lua_pop(L, 2);
  /* optional compiled modules built beside bbblua (bbb.dist_mpi) */
  lua_getfield(L, -1, "cpath");
  push_absolute_templates(L, lua_tostring(L, -1));
  lua_pushfstring(L, "%s/?.so;%s", BBB_MODULE_DIR, lua_tostring(L, -1));
  lua_setfield(L, -4, "cpath");
  lua_pop(L, 3);
}

/* Sets the global `bbb`; on failure reports the error and returns it. */
static int load_bbb(lua_State *L) {
  int status;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_bbb_core);
  lua_setfield(L, -2, "bbb.core");
  lua_pushcfunction(L, luaopen_bbb_bench);
  lua_setfield(L, -2, "bbb.bench");
  lua_pop(L, 1);
  prepend_lua_dir(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "bbb");
  status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, "bbb");
  return report(L, status);
}


/* ------------------------------------------------------------ command line */

enum {
  has_error = 1, has_i = 2, has_v = 4, has_e = 8, has_E = 16, has_l = 32,
  has_help = 64
};

static void print_usage(FILE *f) {
  fprintf(f,
    "usage: %s [options] [script [args]]\n"
    "Available options are:\n"
    "  -e stat   execute string 'stat'\n"
    "  -i        enter interactive mode after executing 'script'\n"
    "  -l mod    require library 'mod' into global 'mod'\n"
    "  -l g=mod  require library 'mod' into global 'g'\n"
    "  -v        show version information\n"
    "  -E        ignore environment variables LUA_INIT and LUA_PATH\n"
    "  -W        turn warnings on\n"
    "  -h, --help  show this help\n"
    "  --        stop handling options\n"
    "  -         stop handling options and execute stdin\n"
    "The global 'bbb' is loaded before anything runs.\n"
    "Environment: BBB_LUA_DIR (bbb Lua library folder), "
    "BBB_HISTORY (REPL history file; empty: none).\n",
    progname);
  fflush(f);
}

static void print_bad_option(const char *opt) {
  if (opt[1] == 'e' || opt[1] == 'l')
    fprintf(stderr, "%s: '%s' needs argument\n", progname, opt);
  else
    fprintf(stderr, "%s: unrecognized option '%s'\n", progname, opt);
  print_usage(stderr);
}

static void print_version(void) {
  fputs("bbblua " BBB_VERSION " (" LUA_RELEASE ")\n", stdout);
  fflush(stdout);
}

/* An option that takes no argument must stand alone: "-i", not "-ix". */
static int lone(const char *opt, int flag) {
  return opt[2] == '\0' ? flag : has_error;
}

static int option_flag(char **argv, int *i) {
  const char *opt = argv[*i];
  switch (opt[1]) {
    case 'E': return lone(opt, has_E);
    case 'W': return lone(opt, 0);
    case 'i': return lone(opt, has_i);
    case 'v': return lone(opt, has_v);
    case 'h': return lone(opt, has_help);
    case 'e': case 'l':
      if (opt[2] == '\0') {
        ++*i;
        if (argv[*i] == NULL || argv[*i][0] == '-') {
          --*i;
          return has_error;
        }
      }
      return opt[1] == 'e' ? has_e : has_l;
    default: return has_error;
  }
}

/*
 * Returns the option flags; *first is the index of the script (argc if
 * none) or, on has_error, of the offending option.
 */
static int collectargs(char **argv, int *first) {
  int args = 0, i;
  for (i = 1; argv[i] != NULL; i++) {
    int flag;
    *first = i;
    if (argv[i][0] != '-' || argv[i][1] == '\0') return args;
    if (argv[i][1] == '-') {
      if (strcmp(argv[i], "--help") == 0) return args | has_help;
      if (argv[i][2] != '\0') return has_error;
      *first = i + 1;
      return args;
    }
    if ((flag = option_flag(argv, &i)) == has_error) {
      *first = i;
      return has_error;
    }
    args |= flag;
  }
  *first = i;
  return args;
}

/* arg[0] is the script, positive indices its arguments, negative the rest. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  int i;
  if (script == argc) script = 0;
  lua_createtable(L, argc - (script + 1), script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int pushargs(lua_State *L) {
  int i, n;
  if (lua_getglobal(L, "arg") != LUA_TTABLE)
    luaL_error(L, "'arg' is not a table");
  n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

static int handle_script(lua_State *L, char **argv) {
  int status;
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
    fname = NULL;
  status = luaL_loadfile(L, fname);
  if (status == LUA_OK) status = docall_with(L, pushargs(L), LUA_MULTRET, script_msghandler);
  if (status != LUA_OK && fname) {   /* "fit.lua: message", as the scripts' own errors read */
    const char *base = strrchr(fname, '/');
    const char *old = progname;
    progname = base ? base + 1 : fname;
    report(L, status);
    progname = old;
    return status;
  }
  return report(L, status);
}

/* "-l mod" sets global mod; "-l g=mod" sets global g. */
static int dolibrary(lua_State *L, const char *spec) {
  int status;
  const char *eq = strchr(spec, '=');
  const char *modname = eq ? eq + 1 : spec;
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  status = docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_pushlstring(L, spec, eq ? (size_t)(eq - spec) : strlen(spec));
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return report(L, status);
}

/* Runs -e, -l and -W in command-line order; 0 if one of them failed. */
static int runargs(lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1];
    if (option == 'e' || option == 'l') {
      const char *extra = argv[i] + 2;
      int status;
      if (*extra == '\0') extra = argv[++i];
      status = option == 'e' ? dostring(L, extra, "=(command line)")
                             : dolibrary(L, extra);
      if (status != LUA_OK) return 0;
    } else if (option == 'W') {
      lua_warning(L, "@on", 0);
    }
  }
  return 1;
}

static int handle_luainit(lua_State *L) {
  const char *name = "=" INIT_VAR_VERSION;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=" INIT_VAR;
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dofile(L, init + 1);
  return dostring(L, init, name);
}


/* ------------------------------------------------------------- line input */

#if defined(BBB_USE_READLINE)

static int use_readline = 0;
static char *history_path = NULL;
static char *input_line = NULL;
static int input_line_done = 0;

static char *make_history_path(void) {
  const char *env = getenv("BBB_HISTORY");
  const char *home = getenv("HOME");
  char *path;
  size_t n;
  if (env != NULL) return env[0] ? strdup(env) : NULL;
  if (home == NULL || home[0] == '\0') return NULL;
  n = strlen(home) + sizeof "/.bbblua_history";
  if ((path = malloc(n)) != NULL) snprintf(path, n, "%s/.bbblua_history", home);
  return path;
}

static void input_open(void) {
  use_readline = isatty(STDIN_FILENO);
  if (!use_readline) return;
  rl_readline_name = "bbblua";
  rl_instream = stdin;
  rl_outstream = stdout;
  /* SIGINT stays ours: read_line_rl turns it into a fresh prompt. */
  rl_catch_signals = 0;
  using_history();
  /* A multi-line statement is one history entry; timestamps in the file
     mark where each entry starts, so it comes back whole next time. */
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  history_path = make_history_path();
  if (history_path == NULL) return;
  /* append_history needs an existing file. */
  if (read_history(history_path) == ENOENT) write_history(history_path);
  history_truncate_file(history_path, HISTORY_MAX_LINES);
}

static void input_close(void) {
  if (history_path != NULL)
    history_truncate_file(history_path, HISTORY_MAX_LINES);
  free(history_path);
  history_path = NULL;
}

/* readline 8.2 already ends the line on Ctrl-D when in bracketed-paste mode. */
static int input_ended_line(void) {
#if RL_READLINE_VERSION >= 0x0802
  const char *paste = rl_variable_value("enable-bracketed-paste");
  return use_readline && rl_eof_found && paste && strcmp(paste, "on") == 0;
#else
  return 0;
#endif
}

/* Set while the chunk being read is a "?name" line rewritten into a call
 * of bbb.help: history keeps what was typed, not the rewrite. */
static int keep_typed_line = 0;

static void saveline(const char *line) {
  HIST_ENTRY *last;
  if (!use_readline || line[0] == '\0' || keep_typed_line) return;
  last = history_get(history_base + history_length - 1);
  if (last != NULL && strcmp(last->line, line) == 0) return;
  add_history(line);
  {
    /* the timestamp line ("#<seconds>") marks where the entry starts */
    char stamp[32];
    snprintf(stamp, sizeof stamp, "#%lld", (long long)time(NULL));
    add_history_time(stamp);
  }
  if (history_path != NULL) append_history(1, history_path);
}

/* Removing the handler here stops readline from printing a fresh prompt. */
static void on_line(char *line) {
  rl_callback_handler_remove();
  input_line = line;
  input_line_done = 1;
}

/*
 * "^C" goes at the end of the abandoned line before the terminal is reset:
 * leaving bracketed-paste mode returns the cursor to column 0.
 */
static void abandon_line(void) {
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_point = rl_end;
  rl_redisplay();
  fputs("^C", rl_outstream);
  fflush(rl_outstream);
  rl_cleanup_after_signal();
  rl_callback_handler_remove();
  fputc('\n', rl_outstream);
  fflush(rl_outstream);
}

/*
 * readline's callback interface, so that a Ctrl-C can end the read: SIGINT
 * is blocked except inside pselect, which then fails with EINTR and the
 * flag set by on_prompt_sigint.
 */
static int read_line_rl(const char *prompt, char **out) {
  int fd = fileno(rl_instream), result = INPUT_OK;
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &orig);
  input_line = NULL;
  input_line_done = 0;
#if RL_READLINE_VERSION >= 0x0802
  /* Left set by a Ctrl-D on a continuation line, it would add a blank line
     after every later one. */
  rl_eof_found = 0;
#endif
  rl_callback_handler_install(prompt, on_line);
  while (!input_line_done) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    if (prompt_interrupted) {
      abandon_line();
      result = INPUT_INTERRUPTED;
      break;
    }
    if (pselect(fd + 1, &fds, NULL, NULL, NULL, &orig) > 0)
      rl_callback_read_char();
    else if (errno != EINTR)
      on_line(NULL);
  }
  if (result == INPUT_OK && input_line == NULL) result = INPUT_EOF;
  sigprocmask(SIG_SETMASK, &orig, NULL);
  *out = input_line;
  return result;
}

#else

static void input_open(void) {}
static void input_close(void) {}
static int input_ended_line(void) { return 0; }
static void saveline(const char *line) { (void)line; }

#endif

static int read_line_plain(const char *prompt, char **out) {
  size_t cap = 0;
  ssize_t n;
  *out = NULL;
  fputs(prompt, stdout);
  fflush(stdout);
  n = getline(out, &cap, stdin);
  if (n >= 0 && !prompt_interrupted) return INPUT_OK;
  free(*out);
  *out = NULL;
  if (!prompt_interrupted) return INPUT_EOF;
  clearerr(stdin);
  fputc('\n', stdout);
  return INPUT_INTERRUPTED;
}

/* The caller frees *out. A Ctrl-C from before this read no longer counts. */
static int read_line(const char *prompt, char **out) {
  prompt_interrupted = 0;
#if defined(BBB_USE_READLINE)
  if (use_readline) return read_line_rl(prompt, out);
#endif
  return read_line_plain(prompt, out);
}


/* -------------------------------------------------------------------- REPL */

/* _PROMPT and _PROMPT2 as in lua, but only plain strings, never metamethods. */
static const char *get_prompt(lua_State *L, int firstline) {
  lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2");
  if (lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
  return firstline ? PROMPT1 : PROMPT2;
}

/* Pushes the next line without its newline, or returns EOF/INTERRUPTED. */
static int pushline(lua_State *L, int firstline) {
  char *line;
  size_t len;
  int top = lua_gettop(L);
  int status = read_line(get_prompt(L, firstline), &line);
  lua_settop(L, top);
  if (status != INPUT_OK) return status;
  len = strlen(line);
  if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
  /* "?name" is help on name: ?bbb.randn, ?randn, ? alone for the summary. */
#if defined(BBB_USE_READLINE)
  keep_typed_line = 0;
#endif
  if (firstline && line[0] == '?') {
    const char *what = line + 1;
#if defined(BBB_USE_READLINE)
    saveline(line);
    keep_typed_line = 1;
#endif
    while (*what == ' ') what++;
    if (*what == '\0') {
      lua_pushliteral(L, "bbb.help()");
    } else {
      /* the name, quoted, both as code to evaluate and as a fallback string */
      lua_getglobal(L, "string");
      lua_getfield(L, -1, "format");
      lua_pushliteral(L, "do local f = load(\"return \" .. %q); local ok, v = pcall(f or error); "
                         "if not ok or v == nil then v = %q end; bbb.help(v) end");
      lua_pushstring(L, what);
      lua_pushstring(L, what);
      lua_call(L, 3, 1);
      lua_remove(L, -2);
    }
    free(line);
    return INPUT_OK;
  }
  /* "=expr" still works, for compatibility with Lua 5.2 habits. */
  if (firstline && line[0] == '=') {
    lua_pushliteral(L, "return ");
    lua_pushlstring(L, line + 1, len - 1);
    lua_concat(L, 2);
  } else {
    lua_pushlstring(L, line, len);
  }
  free(line);
  return INPUT_OK;
}

/* Tries the line as an expression, so that `1+1` prints 2. */
static int addreturn(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    saveline(line);
  } else {
    lua_pop(L, 2);
  }
  return status;
}

/* A chunk is incomplete when the parser ran out of input: "... near <eof>". */
static int incomplete(lua_State *L, int status) {
  static const char mark[] = "<eof>";
  size_t lmsg, lmark = sizeof mark - 1;
  const char *msg;
  if (status != LUA_ERRSYNTAX) return 0;
  msg = lua_tolstring(L, -1, &lmsg);
  return lmsg >= lmark && strcmp(msg + lmsg - lmark, mark) == 0;
}

/*
 * Reads continuation lines until the chunk compiles or fails for another
 * reason. Ctrl-D on a continuation line reports the incomplete chunk;
 * Ctrl-C drops it.
 */
static int multiline(lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    int more;
    if (!incomplete(L, status)) {
      saveline(line);
      return status;
    }
    more = pushline(L, 0);
    if (more != INPUT_OK) {
      saveline(line);
      if (more == INPUT_EOF) return status;
      lua_pop(L, 1);
      return INPUT_INTERRUPTED;
    }
    lua_remove(L, -2);
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Leaves the compiled chunk (or error) alone on the stack. */
static int loadline(lua_State *L) {
  int status;
  lua_settop(L, 0);
  status = pushline(L, 1);
  if (status != INPUT_OK) return status;
  if ((status = addreturn(L)) != LUA_OK) status = multiline(L);
  lua_remove(L, 1);
  return status;
}

/* bbb.repl.print (one result per line, tables and priors shown readably)
 * when bbb is there, else print. */
static int push_printer(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "bbb.app.repl");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "print");
  return 1;
}

/* Through docall, so a huge __tostring can be interrupted too. */
static void l_print(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_pushcfunction(L, push_printer);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK || !lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    lua_getglobal(L, "print");
  }
  lua_insert(L, 1);
  report(L, docall(L, n, 0));
}

static void print_banner(lua_State *L) {
  int loaded = lua_getglobal(L, "bbb") == LUA_TTABLE, helpful = 0;
  fputs("bbblua " BBB_VERSION " (" LUA_RELEASE ")", stdout);
  if (loaded) {
    lua_pushliteral(L, "version");
    if (lua_rawget(L, -2) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER)
      printf(", bbb %s", lua_tostring(L, -1));
    lua_pushliteral(L, "help");
    helpful = lua_rawget(L, -3) == LUA_TFUNCTION;
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  if (!loaded)
    fputs("\nbbb failed to load (see above);", stdout);
  else if (helpful)
    fputs("\nbbb is loaded; help: bbb.help();", stdout);
  else
    fputs("\nbbb is loaded;", stdout);
  fputs(" exit with Ctrl-D or os.exit()\n", stdout);
  fflush(stdout);
}

static void doREPL(lua_State *L) {
  int status;
  const char *oldprogname = progname;
  struct sigaction old;
  progname = NULL;
  print_banner(L);
  input_open();
  bbblua_complete_init(L);
  set_sigint(on_prompt_sigint, &old);
  while ((status = loadline(L)) != INPUT_EOF) {
    if (status == INPUT_INTERRUPTED) continue;
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) l_print(L);
    else report(L, status);
  }
  sigaction(SIGINT, &old, NULL);
  if (!input_ended_line()) lua_writeline();
  input_close();
  lua_settop(L, 0);
  progname = oldprogname;
}


/* -------------------------------------------------------------------- main */

/* Only the REPL survives a bbb that fails to load: it is where one debugs. */
static int repl_only(int args, int script, int argc) {
  if (script != argc || (args & (has_e | has_l))) return 0;
  return (args & has_i) || (!(args & has_v) && isatty(STDIN_FILENO));
}

static int run(lua_State *L, char **argv, int argc, int args, int script) {
  if (load_bbb(L) != LUA_OK && !repl_only(args, script, argc)) return 0;
  if (!(args & has_E) && handle_luainit(L) != LUA_OK) return 0;
  if (!runargs(L, argv, script)) return 0;
  if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & has_i)
    doREPL(L);
  else if (script == argc && !(args & (has_e | has_v))) {
    if (isatty(STDIN_FILENO)) doREPL(L);
    else if (dofile(L, NULL) != LUA_OK) return 0;
  }
  return 1;
}

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script = argc;
  int args = collectargs(argv, &script);
  luaL_checkversion(L);
  if (args == has_error) {
    print_bad_option(argv[script]);
    return 0;
  }
  if (args & has_help) {
    print_usage(stdout);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_v) print_version();
  if (args & has_E) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  createargtable(L, argv, argc, script);
  /* Incremental, not the stock interpreter's generational mode: tensor
  ** memory reaches the collector as debt, which only incremental mode keeps
  ** (the bbb module sets this too when it loads). */
  lua_gc(L, LUA_GCINC, 0, 0, 0);
  /* "-v" alone needs nothing loaded: it must work even if bbb is broken. */
  if (args == has_v && script == argc) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, run(L, argv, argc, args, script));
  return 1;
}

/* The environment the threads need, set before any library starts: bbblua
** starts itself again (once) with what is missing. Functions in
** .preinit_array run before any library's initialiser; setenv cannot serve
** there (libc's own initialiser, which runs next, resets the environment),
** so the new environment goes to execve.
**
** OMP_NUM_THREADS under a tight `ulimit -v`: OpenBLAS (the OpenMP build)
** sets aside about 128 MiB of address space per thread while the program
** loads, and retries a failed allocation forever. When the address space is
** limited and the user set no thread count, the thread count is as large as
** the limit holds (one per 512 MiB, at least one); when not even one fits,
** bbblua stops at once with a clear message. A later allocation that does
** not fit then ends in an out-of-memory error. */
#define BLAS_BYTES_PER_THREAD ((rlim_t)512 << 20)
#define BLAS_MIN_BYTES ((rlim_t)256 << 20)

static int env_has(char **envp, const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t k = 0; envp && envp[k]; k++)
    if (strncmp(envp[k], prefix, n) == 0) return 1;
  return 0;
}

/* "OMP_NUM_THREADS=n" for the address-space limit, or NULL when there is none. */
static char *threads_for_limit(char **argv) {
  static char setting[48];
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return NULL;
  if (rl.rlim_cur < BLAS_MIN_BYTES) {   /* OpenBLAS would spin in its initialiser */
    char msg[200];
    int len = snprintf(msg, sizeof msg, "%s: out of memory: the address-space limit (ulimit -v) "
                       "of %lu MiB is below the %lu MiB OpenBLAS needs to start\n",
                       argv && argv[0] ? argv[0] : "bbblua", (unsigned long)(rl.rlim_cur >> 20),
                       (unsigned long)(BLAS_MIN_BYTES >> 20));
    if (len > 0 && write(2, msg, (size_t)len) < 0) _exit(1);
    _exit(1);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  rlim_t n = rl.rlim_cur / BLAS_BYTES_PER_THREAD;
  if (n < 1) n = 1;
  if (cores > 0 && n > (rlim_t)cores) n = (rlim_t)cores;
  snprintf(setting, sizeof setting, "OMP_NUM_THREADS=%lu", (unsigned long)n);
  return setting;
}

static void prepare_environment(int argc, char **argv, char **envp) {
  static char *env[4096];
  char *add[1];
  size_t nadd = 0, k = 0;
  (void)argc;
  /* envp, not getenv: libc has not set its environment up yet */
  if (!env_has(envp, "OMP_NUM_THREADS=")) {
    char *t = threads_for_limit(argv);
    if (t) add[nadd++] = t;
  }
  if (nadd == 0 || argv == NULL || argv[0] == NULL) return;
  for (; envp && envp[k]; k++) {
    if (k + nadd + 1 >= sizeof env / sizeof env[0]) return;   /* too many to copy: start as asked */
    env[k] = envp[k];
  }
  for (size_t j = 0; j < nadd; j++) env[k++] = add[j];
  env[k] = NULL;
  execve("/proc/self/exe", argv, env);   /* returns only on failure: start as asked */
}

__attribute__((section(".preinit_array"), used))
static void (*const preinit_environment)(int, char **, char **) = prepare_environment;

int main(int argc, char **argv) {
  int status, ok;
  lua_State *L;
  if (argv[0] != NULL && argv[0][0] != '\0') progname = argv[0];
  if (argc < 1 || argv[0] == NULL) {
    static char name[] = "bbblua";
    static char *noargs[] = { name, NULL };
    argc = 1;
    argv = noargs;
  }
  L = luaL_newstate();
  if (L == NULL) {
    l_message(progname, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  ok = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return (ok && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
