"""The training step a ScaFFold user runs, with kgate's modules and with
stock PyTorch, on a CUDA GPU: configuration A's U-Net (kgate.unet), bf16
autocast, channels_last_3d, batch 1.

  correctness  one step of each against an fp32 step on the same weights and
               batch: the loss and every parameter's gradient, relative L2
               error to fp32; kgate's may be at most 1.5x stock bf16's.
  training     --steps N steps of each on the same synthetic data: the two
               loss curves (a PNG where matplotlib is installed) and the final
               losses, which must agree within 2%.
  speed        the whole step (forward, backward, optimizer) of kgate, stock,
               and stock with a torch.compile'd GroupNorm+ReLU, interleaved
               rounds, median and a 95% interval of the ratio (bootstrap).

    PYTHONPATH=tools/python python3 tools/python/examples/unet_step.py [--steps 200] [--out DIR]
"""

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from kgate import nn as knn
from kgate import unet


def make(cfg, fast, dev, state=None):
    m = unet.UNet3d(cfg, fast=fast).to(dev).to(memory_format=torch.channels_last_3d)
    if state is not None:
        m.load_state_dict(state)
    return m


def batch(cfg, dev, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    shape = (1, cfg["in_channels"], 2 ** cfg["scale"], 2 ** cfg["scale"], 2 ** cfg["scale"])
    x = torch.randn(shape, generator=g).to(dev).contiguous(memory_format=torch.channels_last_3d)
    # Labels that depend on x, so that the network can learn them.
    t = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long() * 2 + (x[:, 2] > 1.0).long()
    return x, t.clamp(max=cfg["n_classes"] - 1)


def step_grads(model, x, t, autocast):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        loss = F.cross_entropy(model(x).float(), t)
    loss.backward()
    return loss.item(), {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def correctness(cfg, dev, state, out):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    x, t = batch(cfg, dev, 1)
    l32, g32 = step_grads(make(cfg, False, dev, state), x, t, autocast=False)
    lst, gst = step_grads(make(cfg, False, dev, state), x, t, autocast=True)
    knn.report(reset=True)
    lkg, gkg = step_grads(make(cfg, True, dev, state), x, t, autocast=True)
    rungs = knn.report()
    rows = [("loss", abs(lst - l32) / abs(l32), abs(lkg - l32) / abs(l32))]
    rows += [(n, rel(gst[n], g32[n]), rel(gkg[n], g32[n])) for n in g32]
    bad = [r for r in rows if r[2] > 1.5 * r[1] and r[2] > 0]
    print(f"\ncorrectness (relative L2 error to the fp32 step; kgate must be <= 1.5x stock bf16):")
    print(f"{'tensor':40s} {'stock bf16':>12s} {'kgate bf16':>12s} {'ratio':>7s}")
    for n, s, k in rows:
        print(f"{n:40s} {s:12.3e} {k:12.3e} {k / s if s else float('inf'):7.3f}")
    print(f"{len(rows)} tensors, {len(bad)} above 1.5x; kgate rungs: {rungs}")
    json.dump({"rows": rows, "rungs": {f"{k[0]} | {k[1]}": v for k, v in rungs.items()}},
              open(os.path.join(out, "correctness.json"), "w"), indent=1)
    return not bad


def train(cfg, dev, state, steps, fast):
    torch.backends.cudnn.allow_tf32 = True
    m = make(cfg, fast, dev, state)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for i in range(steps):
        x, t = batch(cfg, dev, 100 + i % 8)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x).float(), t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def timed_step(m, opt, x, t):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(x).float(), t)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def speed(cfg, dev, state, rounds):
    x, t = batch(cfg, dev, 7)
    arms = {"kgate": make(cfg, True, dev, state), "stock": make(cfg, False, dev, state)}
    comp = make(cfg, False, dev, state)
    try:
        for mod in comp.modules():
            if isinstance(mod, unet.GNReLU):
                mod.forward = torch.compile(mod.forward)
        arms["stock+compiled GN"] = comp
    except Exception as e:  # noqa: BLE001
        print(f"torch.compile unavailable: {e}")
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in arms.items()}
    for k in arms:  # warm-up (cudnn autotune, compile)
        for _ in range(3):
            timed_step(arms[k], opts[k], x, t)
    times = {k: [] for k in arms}
    for _ in range(rounds):
        order = list(arms)
        random.shuffle(order)
        for k in order:
            times[k].append(timed_step(arms[k], opts[k], x, t))
    print("\nstep time (ms, median of", rounds, "interleaved rounds):")
    for k, v in times.items():
        print(f"  {k:20s} {statistics.median(v):9.2f}")
    rng = random.Random(0)
    for other in [k for k in arms if k != "kgate"]:
        ratios = []
        for _ in range(2000):
            a = [rng.choice(times[other]) for _ in times[other]]
            b = [rng.choice(times["kgate"]) for _ in times["kgate"]]
            ratios.append(statistics.median(a) / statistics.median(b))
        ratios.sort()
        r = statistics.median(times[other]) / statistics.median(times["kgate"])
        print(f"  {other} / kgate = {r:.3f}  (95% interval {ratios[50]:.3f} .. {ratios[1949]:.3f}; >1: kgate faster)")
    # The per-operator split of one kgate step.
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        timed_step(arms["kgate"], opts["kgate"], x, t)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="A")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", default=".")
    ap.add_argument("--skip", action="append", default=[], help="correctness | training | speed")
    a = ap.parse_args()
    dev = "cuda"
    cfg = unet.configuration(a.config)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"configuration {a.config}: {2 ** cfg['scale']}^3, {cfg['levels']} levels")
    torch.manual_seed(0)
    state = copy.deepcopy(unet.UNet3d(cfg).state_dict())
    ok = True
    if "correctness" not in a.skip:
        ok = correctness(cfg, dev, state, a.out) and ok
    if "training" not in a.skip:
        curves = {k: train(cfg, dev, state, a.steps, fast) for k, fast in (("stock", False), ("kgate", True))}
        fs, fk = curves["stock"][-1], curves["kgate"][-1]
        within = abs(fk - fs) / abs(fs) <= 0.02
        print(f"\ntraining {a.steps} steps: final loss stock {fs:.5f}, kgate {fk:.5f} "
              f"({100 * (fk - fs) / fs:+.2f}%: {'within' if within else 'NOT within'} 2%)")
        json.dump(curves, open(os.path.join(a.out, "loss_curves.json"), "w"))
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            plt.plot(curves["stock"], label="stock PyTorch (cuDNN, ATen GroupNorm)")
            plt.plot(curves["kgate"], label="kgate modules")
            plt.xlabel("step"), plt.ylabel("loss"), plt.legend(), plt.yscale("log")
            plt.title(f"U-Net configuration {a.config}, bf16 autocast, {torch.cuda.get_device_name()}")
            plt.savefig(os.path.join(a.out, "loss_curves.png"), dpi=120)
        except ImportError:
            print("matplotlib not installed: loss_curves.json only")
        ok = within and ok
    if "speed" not in a.skip:
        speed(cfg, dev, state, a.rounds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
