"""PyTorch's CPU float64 convolutions on the configuration-A shapes of
bench_ref (the comparison for the fast references' speed; not part of any
test). Prints one line per shape and direction: GFLOP/s over the full
contraction (padding taps included, as bench_ref counts), best of --reps.

  python3 reference/bench/torch_cpu_fp64.py [--threads N] [--reps R] [--filter SUBSTRING] [--depth-scale S]

--depth-scale divides every spatial extent (at least 1) to keep a run short
on a small machine; bench_ref takes the same shapes with its --depth-scale.
"""
import argparse
import time

import torch
import torch.nn.functional as F

CONVS = [(3, 64, 128), (64, 64, 128), (64, 128, 64), (128, 128, 64), (128, 256, 32), (256, 256, 32),
         (256, 512, 16), (512, 512, 16), (512, 1024, 8), (1024, 1024, 8), (1024, 512, 16), (512, 256, 32),
         (256, 128, 64), (128, 64, 128)]
UPS = [(1024, 8), (512, 16), (256, 32), (128, 64)]


def shapes(scale):
    for d in ("fwd", "bwd_data", "bwd_weight"):
        for ci, co, dd in CONVS:
            if ci == 3 and d == "bwd_data":
                continue
            yield d, "conv3d.%s/%d->%d@%d" % (d, ci, co, dd), dict(t=False, ci=ci, co=co, d=max(1, dd // scale), k=3, s=1,
                                                                     p=1, bias=False)
        yield d, "conv3d.%s/head64->6@128" % d, dict(t=False, ci=64, co=6, d=max(1, 128 // scale), k=1, s=1, p=0,
                                                    bias=True)
        for ci, dd in UPS:
            yield d, "conv_transpose3d.%s/%d->%d@%d" % (d, ci, ci // 2, dd), dict(
                t=True, ci=ci, co=ci // 2, d=max(1, dd // scale), k=2, s=2, p=0, bias=True)


def run(direction, s, reps):
    dt = torch.float64
    # Contiguous N,C,D,H,W: PyTorch's fastest CPU float64 path (vol2col + BLAS);
    # channels_last_3d falls back to a much slower one.
    x = torch.randn(1, s["ci"], s["d"], s["d"], s["d"], dtype=dt)
    wshape = (s["ci"], s["co"], s["k"], s["k"], s["k"]) if s["t"] else (s["co"], s["ci"], s["k"], s["k"], s["k"])
    w = torch.randn(*wshape, dtype=dt)
    b = torch.randn(s["co"], dtype=dt) if s["bias"] else None
    conv = (lambda xx: F.conv_transpose3d(xx, w, b, stride=s["s"])) if s["t"] else (
        lambda xx: F.conv3d(xx, w, b, stride=s["s"], padding=s["p"]))
    with torch.no_grad():
        y = conv(x)
    dy = torch.randn_like(y)
    mask = [direction == "bwd_data", direction == "bwd_weight", direction == "bwd_weight" and s["bias"]]

    def once():
        with torch.no_grad():
            if direction == "fwd":
                return conv(x)
            return torch.ops.aten.convolution_backward(dy, x, w, [s["co"]] if s["bias"] else None, [s["s"]] * 3,
                                                       [s["p"]] * 3, [1] * 3, s["t"], [0] * 3, 1, mask)

    small = y if not s["t"] else x  # the spatially smaller side: every tap pairs one of its positions
    flops = 2.0 * small[0, 0].numel() * s["ci"] * s["co"] * s["k"] ** 3
    best = 1e300
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return flops, best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--filter", default="")
    ap.add_argument("--depth-scale", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("torch %s, %d threads, float64, contiguous N,C,D,H,W; %s" % (torch.__version__, torch.get_num_threads(),
                                                                    torch.__config__.parallel_info().splitlines()[0]))
    for direction, name, s in shapes(a.depth_scale):
        if a.filter not in name:
            continue
        flops, secs = run(direction, s, a.reps)
        print("%-44s d=%-4d %10.1f ms %8.2f GFLOP/s" % (name, s["d"], secs * 1e3, flops / secs / 1e9), flush=True)


if __name__ == "__main__":
    main()
