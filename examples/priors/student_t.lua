--- A prior written in Lua, as a file that returns it: Student-t with nu = 3
-- degrees of freedom and scale 0.1 (up to a constant). Pass the file where a
-- script takes --prior:
--   bbblua scripts/mnist.lua --prior examples/priors/student_t.lua
-- The file's name and a hash of its text are kept in the checkpoint, so a
-- resumed or loaded run finds it again (and refuses it once it changed).
local nu, s = 3, 0.1
return {
  name = ("StudentT{nu=%g, s=%g}"):format(nu, s),
  log_prob = function(_, w)
    return ((w / s):square():div(nu):log1p() * (-(nu + 1) / 2)):sum()
  end,
}
