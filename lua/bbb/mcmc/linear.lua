--- bbb.mcmc.linear: the closed-form posterior of Bayesian linear
-- regression with an intercept, in doubles: the known answer an HMC run on
-- a net with no hidden layer is checked against.
local L = {}

--- L.cholesky(A) -> the lower Cholesky factor of a symmetric positive
-- definite matrix given as rows of doubles (also the dense HMC metric's).
function L.cholesky(A)
  local n, Lm = #A, {}
  for i = 1, n do Lm[i] = {} for j = 1, n do Lm[i][j] = 0 end end
  for j = 1, n do
    local s = A[j][j]
    for k = 1, j - 1 do s = s - Lm[j][k] ^ 2 end
    if not (s > 0) then error("cholesky: the matrix is not positive definite", 0) end
    Lm[j][j] = math.sqrt(s)
    for i = j + 1, n do
      local t = A[i][j]
      for k = 1, j - 1 do t = t - Lm[i][k] * Lm[j][k] end
      Lm[i][j] = t / Lm[j][j]
    end
  end
  return Lm
end

-- A^-1 from its Cholesky factor, column by column.
local function inverse(Lm)
  local n, inv = #Lm, {}
  for i = 1, n do inv[i] = {} end
  for c = 1, n do
    local z = {}
    for i = 1, n do   -- L z = e_c
      local t = i == c and 1 or 0
      for k = 1, i - 1 do t = t - Lm[i][k] * z[k] end
      z[i] = t / Lm[i][i]
    end
    for i = n, 1, -1 do   -- L^T x = z
      local t = z[i]
      for k = i + 1, n do t = t - Lm[k][i] * inv[k][c] end
      inv[i][c] = t / Lm[i][i]
    end
  end
  return inv
end

--- posterior(rows, ys, noise_sigma, prior_sigma) -> mean, cov for the
-- weights then the bias: precision A = Phi^T Phi / s^2 + I / p^2 with Phi
-- the rows with a column of ones appended, mean = A^-1 Phi^T y / s^2.
function L.posterior(rows, ys, s, p)
  local n, d = #rows, #rows[1] + 1
  local A, b = {}, {}
  for i = 1, d do
    A[i], b[i] = {}, 0
    for j = 1, d do A[i][j] = (i == j) and 1 / (p * p) or 0 end
  end
  for r = 1, n do
    local phi = table.move(rows[r], 1, d - 1, 1, {})
    phi[d] = 1
    for i = 1, d do
      b[i] = b[i] + phi[i] * ys[r] / (s * s)
      for j = 1, d do A[i][j] = A[i][j] + phi[i] * phi[j] / (s * s) end
    end
  end
  local cov = inverse(L.cholesky(A))
  local mean = {}
  for i = 1, d do
    local t = 0
    for j = 1, d do t = t + cov[i][j] * b[j] end
    mean[i] = t
  end
  return mean, cov
end

return L
