--- Convolutional layers over NCHW batches: Conv2d, BayesConv2d, MaxPool2d,
-- AvgPool2d, Flatten and View (a flat image batch back to B x C x H x W).
--
-- BayesConv2d is BayesLinear's posterior on a convolution's weights: the
-- same priors, complexity terms, pruning masks and noise hooks (it inherits
-- them); only the forward differs. Its three estimators:
--   weight   one weight sample per forward, then conv2d: the paper's;
--   local    each output sampled from its exact marginal
--            N(conv(x, mu), conv(x^2, sigma^2)). A convolution shares each
--            weight across positions, so the outputs at different positions
--            of one image are correlated under a weight sample; sampling them
--            independently drops that correlation (the per-output marginals
--            stay exact): less gradient noise, a slightly different objective;
--   flipout  conv(x, mu) + conv(x * s_in, dW) * s_out with random signs per
--            example and channel (Wen et al. 2018), shared over positions.
local bbb = require "bbb"
local core = bbb.core
local Module = require "bbb.nn.module"
local BayesLinear = require "bbb.nn.bayes_linear"
local prior_mod = require "bbb.prior"

local M = {}

-- v as a pair {height, width} of integers >= lo, or an error naming the layer.
local function pair(v, key, layer, lo)
  local p = type(v) == "table" and v or { v, v }
  for k = 1, 2 do
    if #p ~= 2 or math.type(p[k]) ~= "integer" or p[k] < lo then
      error(("%s: %s must be an integer >= %d or a pair of them, got %s"):format(layer, key, lo,
        type(v) == "table" and ("{" .. table.concat(v, ", ") .. "}") or tostring(v)), 5)
    end
  end
  return { p[1], p[2] }
end

local function positive(v, what, layer)
  if math.type(v) ~= "integer" or v < 1 or v >= 1 << 20 then
    error(("%s: %s must be a positive integer below 2^20, got %s"):format(layer, what, tostring(v)), 5)
  end
  return v
end

-- The geometry both convolution layers share, checked.
local function conv_geometry(self, layer, n_in, n_out, kernel, opts)
  self.in_channels = positive(n_in, "in_channels", layer)
  self.out_channels = positive(n_out, "out_channels", layer)
  self.kernel = pair(kernel, "kernel_size", layer, 1)
  self.stride = pair(opts.stride or 1, "stride", layer, 1)
  self.padding = pair(opts.padding or 0, "padding", layer, 0)
  self.dilation = pair(opts.dilation or 1, "dilation", layer, 1)
  self.groups = positive(opts.groups or 1, "groups", layer)
  if n_in % self.groups ~= 0 or n_out % self.groups ~= 0 then
    error(("%s: in_channels %d and out_channels %d must be multiples of groups %d"):format(layer,
      n_in, n_out, self.groups), 4)
  end
  self.conv_opts = { stride = self.stride, padding = self.padding, dilation = self.dilation,
                     groups = self.groups }
  self.weight_shape = { n_out, n_in // self.groups, self.kernel[1], self.kernel[2] }
  self.fan_in = (n_in // self.groups) * self.kernel[1] * self.kernel[2]
end

-- A 4-d input with the layer's channels, or an error naming the layer.
local function check_image(x, layer, channels)
  if not bbb.is_tensor(x) then
    error(("%s: input must be a tensor, got %s"):format(layer, type(x)), 4)
  end
  if x:dim() ~= 4 or (channels and x:size(2) ~= channels) then
    error(("%s: input of size %s does not match the layer's %d input channels (expected batch x %d "
      .. "x height x width)"):format(layer, table.concat(x:size(), "x"), channels, channels), 4)
  end
end

-- fn (a convolution op) with the layer named in a shape error (a kernel
-- larger than the padded input, say).
local function call(self, fn, ...)
  local ok, y = pcall(fn, ...)
  if not ok then error(("%s: %s"):format(self:describe(), tostring(y):gsub("^[^\n]-:%d+: ", "")), 5) end
  return y
end

local function conv(self, x, w, b) return call(self, bbb.conv2d, x, w, b, self.conv_opts) end

local function geometry_config(self, ty)
  return { type = ty, in_channels = self.in_channels, out_channels = self.out_channels,
           kernel = self.kernel, stride = self.stride, padding = self.padding,
           dilation = self.dilation, groups = self.groups }
end

-- "6 -> 16, 5x5, stride 2, padding 1": what differs from the defaults.
local function geometry_string(self)
  local s = ("%d -> %d, %dx%d"):format(self.in_channels, self.out_channels, self.kernel[1], self.kernel[2])
  for _, k in ipairs { "stride", "padding", "dilation" } do
    local v, d = self[k], k == "padding" and 0 or 1
    if v[1] ~= d or v[2] ~= d then
      s = s .. (v[1] == v[2] and (", %s %d"):format(k, v[1]) or (", %s %dx%d"):format(k, v[1], v[2]))
    end
  end
  if self.groups > 1 then s = s .. (", groups %d"):format(self.groups) end
  return s
end

local Conv2d = Module.class("Conv2d")
M.Conv2d = Conv2d

--- Conv2d(in_channels, out_channels, kernel_size [, {stride =, padding =,
-- dilation =, groups =, bias = true, generator =}]): PyTorch's nn.Conv2d;
-- each option an integer or a pair {height, width}; weights uniform in
-- +-1/sqrt(fan-in).
-- @usage
--   local conv = bbb.nn.Conv2d(1, 8, 3, { padding = 1 })
--   assert(conv(bbb.rand(2, 1, 28, 28)):size(2) == 8)
function Conv2d:init(n_in, n_out, kernel, opts)
  opts = opts or {}
  conv_geometry(self, "Conv2d", n_in, n_out, kernel, opts)
  local s = 1 / math.sqrt(self.fan_in)
  self.weight = bbb.rand(self.weight_shape, -s, s, opts.generator):requires_grad(true)
  if opts.bias ~= false then
    self.bias = bbb.rand({ n_out }, -s, s, opts.generator):requires_grad(true)
  end
end

function Conv2d:forward(x)
  check_image(x, "Conv2d", self.in_channels)
  return conv(self, x, self.weight, self.bias)
end

function Conv2d:own_parameters()
  local out = { { "weight", self.weight } }
  if self.bias then out[2] = { "bias", self.bias } end
  return out
end

function Conv2d:config()
  local c = geometry_config(self, "Conv2d")
  c.bias = self.bias ~= nil
  return c
end

function Conv2d:describe() return ("Conv2d(%s)"):format(geometry_string(self)) end
function Conv2d:__tostring() return self:describe() end

local BayesConv2d = Module.class("BayesConv2d", BayesLinear)
M.BayesConv2d = BayesConv2d

--- BayesConv2d(in_channels, out_channels, kernel_size [, opts]): a Gaussian
-- posterior over every weight of a convolution. opts: Conv2d's geometry
-- (stride, padding, dilation, groups, bias) and BayesLinear's prior,
-- estimator ("weight", "local", "flipout"), kl ("mc", "analytic"),
-- mu_scale (default 1/sqrt(fan-in)), rho_init (-5), mode, generator, masked.
-- @usage
--   local conv = bbb.nn.BayesConv2d(1, 4, 5, { estimator = "flipout", prior = bbb.prior.Gaussian{ sigma = 1 } })
--   assert(conv(bbb.rand(2, 1, 28, 28)):size(3) == 24)
function BayesConv2d:init(n_in, n_out, kernel, opts)
  opts = opts or {}
  conv_geometry(self, "BayesConv2d", n_in, n_out, kernel, opts)
  BayesLinear.init_posterior(self, "BayesConv2d", self.weight_shape, self.fan_in, n_out, opts)
end

local function masked(t, m)
  if t == nil or m == nil then return t end
  return t * m
end

-- +1 or -1 with equal probability
local function random_signs(shape, gen)
  return bbb.rand(shape, 0, 1, gen):lt(0.5) * 2 - 1
end

local function noise(self, key) return self.noise and self.noise[key] end

-- The output size of the layer on x, or nil when the kernel does not fit
-- (conv2d then says so).
local function out_size(self, x)
  local size = { x:size(1), self.out_channels }
  for d = 1, 2 do
    local span = self.dilation[d] * (self.kernel[d] - 1) + 1
    local n = x:size(d + 2) + 2 * self.padding[d]
    if n < span then return nil end
    size[d + 2] = (n - span) // self.stride[d] + 1
  end
  return size
end

--- forward_local(x, var, bvar, wm, bm): local reparameterization, each output from N(conv(x, mu), conv(x^2, sigma^2)),
-- both convolutions and the sampling in one op.
-- var, bvar: sigma^2 of the weights and biases (from the sample's pass).
function BayesConv2d:forward_local(x, var, bvar, wm, bm)
  local size = out_size(self, x)
  if not size then return conv(self, x, self.weight_mu, self.bias_mu) end   -- the shape error
  var, bvar = masked(var, wm), masked(bvar, bm)
  local eps = noise(self, "out") or bbb.randn(size, 0, 1, self.generator)
  return call(self, core.conv2d_local, x, masked(self.weight_mu, wm), var, masked(self.bias_mu, bm),
    bvar, eps, self.conv_opts)
end

--- forward_flipout(x, dw, b, wm, bm): flipout, signs per example and channel, shared over the positions; the
-- two convolutions and the signs in one op. dw: the sample minus mu.
function BayesConv2d:forward_flipout(x, dw, b, wm, bm)
  local B = x:size(1)
  local s_in = noise(self, "s_in") or random_signs({ B, self.in_channels, 1, 1 }, self.generator)
  local s_out = noise(self, "s_out") or random_signs({ B, self.out_channels, 1, 1 }, self.generator)
  return call(self, core.conv2d_flipout, x, masked(self.weight_mu, wm), masked(dw, wm),
    masked(b, bm), s_in, s_out, self.conv_opts)
end

function BayesConv2d:forward(x)
  check_image(x, "BayesConv2d", self.in_channels)
  local wm, bm = self.weight_mask, self.bias_mask
  if self.mode == "mean" and not self.training then
    self.last_kl = nil
    return conv(self, x, masked(self.weight_mu, wm), masked(self.bias_mu, bm))
  end
  -- every estimator's complexity term comes from a weight sample (or the
  -- analytic KL); the pass that draws it hands on what the estimator uses
  local est = self.estimator
  local w, klw = self:sample(self.weight_mu, self.weight_rho, "w",
    est == "local" and "var" or est == "flipout" and "delta" or "w")
  local b, klb = self:sample_bias(est == "local" and "var" or "w")
  self.last_kl = klw + klb
  if est == "weight" then return conv(self, x, masked(w, wm), masked(b, bm)) end
  if est == "local" then return self:forward_local(x, w, b, wm, bm) end
  return self:forward_flipout(x, w, b, wm, bm)
end

function BayesConv2d:config()
  local c = geometry_config(self, "BayesConv2d")
  c.prior, c.estimator, c.kl = prior_mod.config(self.prior), self.estimator, self.kl_mode
  c.mode, c.bias, c.masked = self.mode, self.bias_mu ~= nil, self.weight_mask ~= nil or nil
  return c
end

function BayesConv2d:describe() return ("BayesConv2d(%s)"):format(geometry_string(self)) end

function BayesConv2d:__tostring()
  return ("BayesConv2d(%s, prior=%s, estimator=%s%s)"):format(geometry_string(self),
    prior_mod.describe(self.prior), self.estimator, self.kl_mode == "analytic" and ", kl=analytic" or "")
end

-- A pooling layer class: fn is bbb.max_pool2d or bbb.avg_pool2d.
local function pooling(name, fn)
  local cls = Module.class(name)
  --- MaxPool2d(kernel_size [, {stride = kernel_size, padding = 0}]) and
  -- AvgPool2d(...): pooling over each window of a B x C x H x W batch.
  function cls:init(kernel, opts)
    opts = opts or {}
    self.kernel = pair(kernel, "kernel_size", name, 1)
    self.stride = pair(opts.stride or self.kernel, "stride", name, 1)
    self.padding = pair(opts.padding or 0, "padding", name, 0)
  end
  function cls:forward(x)
    check_image(x, name)
    local ok, y = pcall(fn, x, self.kernel, { stride = self.stride, padding = self.padding })
    if not ok then error(("%s: %s"):format(tostring(self), tostring(y):gsub("^[^\n]-:%d+: ", "")), 3) end
    return y
  end
  function cls:config()
    return { type = name, kernel = self.kernel, stride = self.stride, padding = self.padding }
  end
  function cls:__tostring()
    local k, s = self.kernel, self.stride
    local t = ("%s(%dx%d"):format(name, k[1], k[2])
    if s[1] ~= k[1] or s[2] ~= k[2] then t = t .. (", stride %dx%d"):format(s[1], s[2]) end
    if self.padding[1] > 0 or self.padding[2] > 0 then
      t = t .. (", padding %dx%d"):format(self.padding[1], self.padding[2])
    end
    return t .. ")"
  end
  return cls
end

--- MaxPool2d(kernel_size [, {stride = kernel_size, padding = 0}]): the maximum of each window.
M.MaxPool2d = pooling("MaxPool2d", bbb.max_pool2d)
--- AvgPool2d(kernel_size [, {stride = kernel_size, padding = 0}]): the mean of each window.
M.AvgPool2d = pooling("AvgPool2d", bbb.avg_pool2d)

local Flatten = Module.class("Flatten")
M.Flatten = Flatten

--- Flatten([start_dim = 2]): B x C x H x W -> B x (C H W), for the dense
-- layers after the convolutions.
function Flatten:init(start_dim) self.start_dim = start_dim or 2 end
function Flatten:forward(x) return bbb.flatten(x, self.start_dim) end
function Flatten:config() return { type = "Flatten", start_dim = self.start_dim } end
function Flatten:__tostring() return "Flatten()" end

local View = Module.class("View")
M.View = View

--- View(n1, n2, ...): each example reshaped to n1 x n2 x ...: a flat
-- 784-pixel batch becomes B x 1 x 28 x 28 with View(1, 28, 28).
function View:init(...)
  self.sizes = { ... }
  if #self.sizes == 0 then error("View: needs the sizes of one example", 3) end
  for i, n in ipairs(self.sizes) do positive(n, ("size %d"):format(i), "View") end
end

function View:forward(x)
  local n = 1
  for _, s in ipairs(self.sizes) do n = n * s end
  if not bbb.is_tensor(x) or x:dim() < 1 or x:numel() ~= x:size(1) * n then
    error(("View: input of size %s does not hold batch x %s"):format(
      bbb.is_tensor(x) and table.concat(x:size(), "x") or type(x), table.concat(self.sizes, "x")), 3)
  end
  return x:reshape { x:size(1), table.unpack(self.sizes) }
end

function View:config() return { type = "View", sizes = self.sizes } end
function View:__tostring() return ("View(%s)"):format(table.concat(self.sizes, "x")) end

-- nn.build's constructors for these layers: c is the config, int(key)
-- reads a checked positive integer, scratch initialises the parameters.
-- A checkpoint's JSON gives 5.0 for 5: integers back, in numbers and pairs.
local function ints(v)
  if type(v) == "number" then return math.tointeger(v) or v end
  if type(v) ~= "table" then return v end
  local out = {}
  for i, x in ipairs(v) do out[i] = math.tointeger(x) or x end
  return out
end

local function geometry_opts(c, extra)
  local o = { stride = ints(c.stride), padding = ints(c.padding), dilation = ints(c.dilation),
              groups = ints(c.groups), bias = c.bias ~= false }
  for k, v in pairs(extra) do o[k] = v end
  return o
end

M.builders = {
  Conv2d = function(c, int, _, scratch)
    return Conv2d(int("in_channels"), int("out_channels"), ints(c.kernel), geometry_opts(c, { generator = scratch }))
  end,
  BayesConv2d = function(c, int, opts, scratch, p)
    local m = BayesConv2d(int("in_channels"), int("out_channels"), ints(c.kernel), geometry_opts(c,
      { prior = p, estimator = c.estimator, kl = c.kl, mode = c.mode, masked = c.masked == true,
        generator = scratch }))
    m.generator = opts.generator
    return m
  end,
  MaxPool2d = function(c) return M.MaxPool2d(ints(c.kernel), { stride = ints(c.stride), padding = ints(c.padding) }) end,
  AvgPool2d = function(c) return M.AvgPool2d(ints(c.kernel), { stride = ints(c.stride), padding = ints(c.padding) }) end,
  Flatten = function(c) return Flatten(ints(c.start_dim)) end,
  View = function(c) return View(table.unpack(ints(c.sizes or {}))) end,
}

return M
