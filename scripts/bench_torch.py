#!/usr/bin/env python3
"""Reference numbers from PyTorch for scripts/bench_bbb.lua (optional; bbb
itself does not use Python). The Bayesian layer is written per weight, the way
the PyTorch reproductions of Blundell et al. write it: sample eps, w = mu +
log1p(exp(rho)) * eps, log q and the scale-mixture log p summed per weight.
Prints the training-step time, the time of the same GEMMs alone measured in
the same run, and their ratio. Needs Debian's python3-torch:

    /usr/bin/python3 scripts/bench_torch.py --threads 2
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


def log_normal(x, sigma):
    return -HALF_LOG_2PI - math.log(sigma) - x * x / (2 * sigma * sigma)


def log_mixture(w):
    return torch.logaddexp(math.log(PI) + log_normal(w, S1),
                           math.log(1 - PI) + log_normal(w, S2)).sum()


class BayesLinear(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        s = 1 / math.sqrt(n_in)
        self.w_mu = torch.nn.Parameter(torch.empty(n_out, n_in).uniform_(-s, s))
        self.w_rho = torch.nn.Parameter(torch.full((n_out, n_in), -5.0))
        self.b_mu = torch.nn.Parameter(torch.empty(n_out).uniform_(-s, s))
        self.b_rho = torch.nn.Parameter(torch.full((n_out,), -5.0))

    def forward(self, x):
        kl = 0
        params = []
        for mu, rho in ((self.w_mu, self.w_rho), (self.b_mu, self.b_rho)):
            eps = torch.randn_like(mu)
            sigma = torch.log1p(torch.exp(rho))
            w = mu + sigma * eps
            log_q = (-HALF_LOG_2PI - torch.log(sigma) - 0.5 * eps * eps).sum()
            kl = kl + log_q - log_mixture(w)
            params.append(w)
        self.kl = kl
        return torch.nn.functional.linear(x, params[0], params[1])


def bench(sizes):
    layers = [BayesLinear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    net = torch.nn.Sequential(*sum(([l, torch.nn.ReLU()] for l in layers), [])[:-1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.rand(args.batch, sizes[0]) * 2
    y = torch.arange(args.batch) % sizes[-1]
    n_batches = math.ceil(60000 / args.batch)

    def step():
        opt.zero_grad()
        out = net(x)
        kl = sum(l.kl for l in layers)
        loss = (torch.nn.functional.cross_entropy(out, y, reduction="sum") + kl / n_batches) / args.batch
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    t_step = sorted(times)[len(times) // 2]

    # the same GEMMs alone: forward x W^T, backward g^T x and g W
    def gemms():
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            xa, w, g = torch.rand(args.batch, a), torch.rand(b, a), torch.rand(args.batch, b)
            t0 = time.perf_counter()
            torch.mm(xa, w.t())
            torch.mm(g.t(), xa)
            if i > 0:
                torch.mm(g, w)
            yield time.perf_counter() - t0
    floors = []
    for _ in range(21):
        floors.append(sum(gemms()))
    t_gemm = sorted(floors)[len(floors) // 2]
    return t_step, t_gemm


print(f"torch {torch.__version__}, {args.threads} thread(s), batch {args.batch}, per-weight BBB layer, Adam")
print(f"{'network':18} {'step ms':>10} {'GEMMs ms':>10} {'ratio':>8}")
for sizes in ([784, 1200, 1200, 10], [784, 400, 400, 10]):
    t_step, t_gemm = bench(sizes)
    print(f"{'-'.join(map(str, sizes)):18} {t_step * 1e3:10.2f} {t_gemm * 1e3:10.2f} {t_step / t_gemm:8.2f}")
