--- Is it the pixels MNIST never lights? A saved MNIST classifier's AUROC of
-- MNIST (the first --limit test images) against Fashion-MNIST by mutual
-- information over weight draws: with the Fashion images as they are, with
-- the pixels that no MNIST training image lights set to 0 in them, and with
-- those images also dimmed to MNIST's mean intensity. If the AUROC holds,
-- the model tells the two apart by more than those pixels and the
-- brightness (doc/notebook/experiments.md, "Out of distribution: the prior decides").
--   build/bbblua examples/ood_pixels.lua out/ood-bbb.safetensors [SAMPLES] [LIMIT]
local bbb = require "bbb"
bbb.set_num_threads(1)
local model = assert(arg[1], "usage: ood_pixels.lua MODEL [SAMPLES] [LIMIT]") and bbb.load(arg[1])
local samples, limit = tonumber(arg[2] or 20), tonumber(arg[3] or 5000)
local scale = 1 / 126   -- the pixel scale of every MNIST run here

local train = bbb.data.load_mnist{ split = "train", scale = scale }
local lit = train.x:abs():sum(1):gt(0):reshape{ 1, -1 }   -- 1 where some training image lights the pixel
local mnist = bbb.data.load_mnist{ split = "test", scale = scale, limit = limit }
local fashion = bbb.data.load_fashion_mnist{ split = "test", scale = scale, limit = limit }

local function mi(x)
  local out = {}
  for start = 1, x:size(1), 2500 do
    local xc = x:narrow(1, start, math.min(2500, x:size(1) - start + 1))
    local _, stack = model:predict(xc, { samples = samples, keep_samples = "tensor" })
    for _, v in ipairs(bbb.metrics.mutual_information(stack, 2):totable()) do out[#out + 1] = v end
  end
  return out
end

bbb.manual_seed(1)
local inside = mi(mnist.x)
local masked = fashion.x * lit
local dim = (mnist.x:sum():item() / mnist.x:size(1)) / (masked:sum():item() / masked:size(1))
print(("pixels never lit by the %d MNIST training images: %d of %d"):format(train.n,
  lit:numel() - lit:sum():item(), lit:numel()))
for _, row in ipairs { { "Fashion-MNIST as it is", fashion.x }, { "those pixels set to 0", masked },
                       { ("and dimmed to MNIST's mean intensity (x%.3f)"):format(dim), masked * dim } } do
  print(("AUROC by MI, %-48s %.4f"):format(row[1], bbb.metrics.detection(inside, mi(row[2])).auroc))
end
