#!/usr/bin/env python3
"""Reference numbers from PyTorch for scripts/bench_bbb.lua (optional; bbb
itself does not use Python). Times, on 784-1200-1200-10 and 784-400-400-10
(float32): a Bayes-by-Backprop training step written per weight, the way the
PyTorch reproductions of Blundell et al. write it (blitz-style: mu and rho per
weight, one weight sample per step by the reparameterization trick
w = mu + log1p(exp(rho)) * eps, the complexity term log q(w) - log p(w) under
the scale-mixture prior by Monte Carlo, Adam), a plain MLP training step
(Linear + ReLU, Adam), and the GEMMs of a step alone (torch.mm of the forward
and backward shapes). Needs Debian's python3-torch:

    python3 scripts/bench_torch.py --threads 2

Also the LeNet of bbb.nn.lenet (lenet: its Bayesian step with a per-weight
BayesConv2d written the same way, and its plain step). Prints one line per figure, "<what>_ms <network> <milliseconds>" (what:
bayes, plain, gemms), after a "torch_version <version>" line; bench_bbb.lua
reads them.
"""
import argparse
import math
import time

import torch

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--threads", type=int, default=2)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--steps", type=int, default=30)
args = p.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(1)

PI, S1, S2 = 0.5, 1.0, math.exp(-6)
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
N_BATCHES = math.ceil(60000 / args.batch)


def log_normal(x, sigma):
    return -HALF_LOG_2PI - math.log(sigma) - x * x / (2 * sigma * sigma)


def log_mixture(w):
    return torch.logaddexp(math.log(PI) + log_normal(w, S1),
                           math.log(1 - PI) + log_normal(w, S2)).sum()


def sample(layer):
    """One weight sample of a layer's weight and bias by the
    reparameterization trick; sets layer.kl to log q(w) - log p(w)."""
    kl = 0
    params = []
    for mu, rho in ((layer.w_mu, layer.w_rho), (layer.b_mu, layer.b_rho)):
        eps = torch.randn_like(mu)
        sigma = torch.log1p(torch.exp(rho))
        w = mu + sigma * eps
        log_q = (-HALF_LOG_2PI - torch.log(sigma) - 0.5 * eps * eps).sum()
        kl = kl + log_q - log_mixture(w)
        params.append(w)
    layer.kl = kl
    return params


class BayesLinear(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        s = 1 / math.sqrt(n_in)
        self.w_mu = torch.nn.Parameter(torch.empty(n_out, n_in).uniform_(-s, s))
        self.w_rho = torch.nn.Parameter(torch.full((n_out, n_in), -5.0))
        self.b_mu = torch.nn.Parameter(torch.empty(n_out).uniform_(-s, s))
        self.b_rho = torch.nn.Parameter(torch.full((n_out,), -5.0))
        self.kl = 0

    def forward(self, x):
        w, b = sample(self)
        return torch.nn.functional.linear(x, w, b)


class BayesConv2d(torch.nn.Module):
    """The same per-weight posterior for a convolution."""

    def __init__(self, c_in, c_out, k, padding=0):
        super().__init__()
        s = 1 / math.sqrt(c_in * k * k)
        self.padding = padding
        self.w_mu = torch.nn.Parameter(torch.empty(c_out, c_in, k, k).uniform_(-s, s))
        self.w_rho = torch.nn.Parameter(torch.full((c_out, c_in, k, k), -5.0))
        self.b_mu = torch.nn.Parameter(torch.empty(c_out).uniform_(-s, s))
        self.b_rho = torch.nn.Parameter(torch.full((c_out,), -5.0))
        self.kl = 0

    def forward(self, x):
        w, b = sample(self)
        return torch.nn.functional.conv2d(x, w, b, padding=self.padding)


def lenet(bayes):
    """bbb.nn.lenet's network: 5x5 convolutions of 16 and 32 channels, ReLU,
    2x2 max pooling, a dense layer of 256 and the output layer."""
    conv = BayesConv2d if bayes else (lambda a, b, k, padding=0: torch.nn.Conv2d(a, b, k, padding=padding))
    dense = BayesLinear if bayes else torch.nn.Linear
    layers = [conv(1, 16, 5, padding=2), conv(16, 32, 5), dense(800, 256), dense(256, 10)]
    net = torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 28, 28)), layers[0], torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        layers[1], torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        layers[2], torch.nn.ReLU(), layers[3])
    return net, layers


def mlp(sizes, layer):
    layers = [layer(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    net = torch.nn.Sequential(*sum(([m, torch.nn.ReLU()] for m in layers), [])[:-1])
    return net, layers


def time_steps(step):
    for _ in range(5):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def time_step(sizes, bayes):
    if sizes == "lenet":
        net, layers = lenet(bayes)
        sizes = [784, 10]
    else:
        net, layers = mlp(sizes, BayesLinear if bayes else torch.nn.Linear)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.rand(args.batch, sizes[0]) * 2
    y = torch.arange(args.batch) % sizes[-1]

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y, reduction="sum")
        if bayes:
            loss = loss + sum(m.kl for m in layers) / N_BATCHES
        (loss / args.batch).backward()
        opt.step()
    return time_steps(step)


def time_gemms(sizes):
    """The GEMMs of one step alone: per layer forward x W^T, backward g^T x
    (grad W) and g W (grad x, not for the input layer); median of 21."""
    mats = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        mats.append((i, torch.rand(args.batch, a), torch.rand(b, a), torch.rand(args.batch, b)))

    def gemms():
        for i, xa, w, g in mats:
            torch.mm(xa, w.t())
            torch.mm(g.t(), xa)
            if i > 0:
                torch.mm(g, w)
    gemms()
    times = []
    for _ in range(21):
        t0 = time.perf_counter()
        gemms()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


print(f"torch_version {torch.__version__}")
print(f"# {args.threads} thread(s), batch {args.batch}, float32, median of {args.steps} steps")
for sizes in ([784, 1200, 1200, 10], [784, 400, 400, 10]):
    name = "-".join(map(str, sizes))
    print(f"bayes_ms {name} {time_step(sizes, True) * 1e3:.3f}", flush=True)
    print(f"plain_ms {name} {time_step(sizes, False) * 1e3:.3f}", flush=True)
    print(f"gemms_ms {name} {time_gemms(sizes) * 1e3:.3f}", flush=True)
print(f"bayes_ms lenet {time_step('lenet', True) * 1e3:.3f}", flush=True)
print(f"plain_ms lenet {time_step('lenet', False) * 1e3:.3f}", flush=True)
