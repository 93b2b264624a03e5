-- bbblua's REPL driven through a real pseudo-terminal (tmux): completion,
-- help, printing, Ctrl-C inside a long C loop, a second Ctrl-C, and
-- multi-line history across sessions. Waits poll the screen; nothing here
-- measures time.
local build = os.getenv("BBB_BUILD") or "build"
local bbblua = build .. "/bbblua"

local helpers = require "helpers"
local q, sh = helpers.q, helpers.sh   -- sh(cmd) -> output, exit status

local have_tmux = select(2, sh("command -v tmux")) == 0

local Session = {}
Session.__index = Session

local count = 0
local function start(history)
  count = count + 1
  local self = setmetatable({ sock = ("bbbpty%d_%d"):format(os.time() % 100000, count) }, Session)
  local env = "env BBB_HISTORY=" .. q(history) .. " TERM=xterm "
  local _, status = sh(("tmux -L %s new-session -d -x 150 -y 50 %s"):format(self.sock,
    q(env .. bbblua)))
  assert(status == 0, "tmux could not start a session")
  self:wait_for("os%.exit%(%)\n>")   -- the prompt: readline is listening
  return self
end

function Session:screen()
  return (sh(("tmux -L %s capture-pane -p -S -200"):format(self.sock)))
end

-- Polls the screen until pattern (a Lua pattern) shows; errors with the
-- screen after about 30 s.
function Session:wait_for(pattern, plain)
  for _ = 1, 300 do
    local s = self:screen()
    if s:find(pattern, 1, plain) then return s end
    sh("sleep 0.1")
  end
  error("timed out waiting for " .. pattern .. " in:\n" .. self:screen())
end

function Session:type(text) sh(("tmux -L %s send-keys -l %s"):format(self.sock, q(text))) end
function Session:key(name) sh(("tmux -L %s send-keys %s"):format(self.sock, name)) end
function Session:line(text) self:type(text); self:key("Enter") end
function Session:alive() return select(2, sh(("tmux -L %s has-session"):format(self.sock))) == 0 end
function Session:close() sh(("tmux -L %s kill-server"):format(self.sock)) end

describe("the REPL on a terminal", function()
  local history = os.tmpname()
  local s
  before_each(function()
    assert(have_tmux, "tmux is needed for these specs (scripts/bootstrap installs it)")
    s = start(history)
  end)
  after_each(function() if s then s:close() end end)
  teardown(function() os.remove(history) end)

  it("completes table fields and tensor methods with Tab", function()
    s:type("bbb.ze")
    s:key("Tab")
    s:wait_for("> bbb.zeros", true)      -- completed as far as it is unique
    s:key("Tab")
    s:key("Tab")
    s:wait_for("bbb.zeros_like", true)   -- then the two candidates listed
    s:type("(2, 3)")
    s:key("Enter")
    s:wait_for("[bbb.Tensor of size 2x3]", true)
    s:line("x = bbb.randn(3)")
    s:type("x:so")
    s:key("Tab")
    s:wait_for("> x:soft\n", true)
    s:key("Tab")
    s:key("Tab")
    local screen = s:wait_for("x:softplus", true)
    assert.truthy(screen:find("x:softmax", 1, true), screen)
  end)

  it("?name and bbb.help print signatures and docs", function()
    s:line("?bbb.randn")
    s:wait_for("randn({n1, n2, ...} [, mean, std [, gen]]) -> tensor", true)
    s:line('bbb.help "narrow"')
    s:wait_for("narrow(x, dim, start, len) -> tensor", true)
    s:line("bbb.help()")
    s:wait_for("elbo:loss(net, x, y)", true)
  end)

  it("prints sizes, tables, priors and several results one per line", function()
    s:line("bbb.zeros(2, 3):size(), {1, a = 2}, bbb.prior.Gaussian{sigma = 2}")
    s:wait_for("bbb.Size{2, 3}\n{1, a = 2}\nGaussian{sigma=2}\n", true)
    s:line("bbb.randn(3000, 3000)")
    s:wait_for("[bbb.Tensor of size 3000x3000]", true)
  end)

  it("Ctrl-C stops a long C loop, and a second Ctrl-C keeps the session", function()
    s:line("bbb.set_num_threads(1); x = bbb.rand(2^26); y = nil; print('ready')")
    s:wait_for("ready\n>")
    s:line("y = x:pow(2.5):pow(0.5):pow(2.5):pow(0.5)")
    s:wait_for("pow%(0%.5%)\n")   -- the line was read and runs
    sh("sleep 1")
    s:key("C-c")
    local screen = s:wait_for("interrupted")
    -- the message comes from the op whose loop stopped, not from Lua's hook
    assert.truthy(screen:find("pow: interrupted", 1, true), screen)
    -- the second Ctrl-C, at the prompt, must only give a new prompt; wait
    -- for it before typing, or a late ^C would wipe the typed line
    screen = s:wait_for("in %?\n>")   -- the traceback is done: the prompt is back
    local _, prompts = screen:gsub("\n>", "")
    s:key("C-c")
    for _ = 1, 300 do
      local _, n = s:screen():gsub("\n>", "")
      if n > prompts then break end
      sh("sleep 0.1")
    end
    s:line("print(y == nil and 'y-is-nil', 'still here')")
    s:wait_for("y%-is%-nil%s+still here")
    assert.is_true(s:alive())
    s:line("x = nil; collectgarbage()")
  end)

  it("a multi-line statement comes back whole from the history of an earlier session", function()
    s:line("for i = 1, 2 do")
    s:line("  print('line ' .. i)")
    s:line("end")
    s:wait_for("line 2", true)
    s:key("C-d")
    for _ = 1, 100 do if not s:alive() then break end sh("sleep 0.1") end
    s:close()
    s = start(history)
    s:key("Up")
    s:wait_for("> for i = 1, 2 do\n", true)
    s:key("Enter")
    local screen = s:wait_for("line 1\nline 2", true)
    assert.truthy(screen:find("for i = 1, 2 do\n  print('line ' .. i)\nend", 1, true), screen)
  end)
end)
