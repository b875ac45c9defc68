#!/usr/bin/env python3
"""Speed of kgate's convolution kernels against PyTorch (cuDNN) on the
configuration's conv problems of corpus/shapes.json, every direction.

PyTorch arm: bf16 tensors in channels_last_3d, torch.backends.cudnn.benchmark
on; once with the default algorithms and once with
torch.use_deterministic_algorithms(True). Forward is F.conv3d /
F.conv_transpose3d; backward-data and backward-weight are
aten.convolution_backward with only dx, or only dw (and db), requested, so
each direction is timed alone. kgate arm: the output of `gn_bench_cuda --iters
N DESCRIPTOR ...` (the production plan's launch sequence, kernels only), run
by this script (--kgate-bench) or read from a file (--kgate-output).

Prints a table (ms, TFLOP/s, kgate/cuDNN ratio) and the step-weighted totals
(sum of calls-per-step x time) per operator and over the three conv3d
directions. Usage:

    python3 torch_conv.py --corpus corpus/shapes.json --config A \
        (--kgate-bench build/kernels/groupnorm/gn_bench_cuda | --kgate-output FILE)
        [--iters 20] [--json out.json]
"""
import argparse
import json
import re
import subprocess
import sys

import torch
import torch.nn.functional as F


def out_extent(q, a):
    span = q["dilation"][a] * (q["kernel"][a] - 1)
    if q["op"] == "conv3d":
        return (q["in"][a] + q["pad_front"][a] + q["pad_back"][a] - span - 1) // q["stride"][a] + 1
    return ((q["in"][a] - 1) * q["stride"][a] - q["pad_front"][a] - q["pad_back"][a] + span
            + q["output_padding"][a] + 1)


def flops(q):
    k = q["kernel"][0] * q["kernel"][1] * q["kernel"][2]
    if q["op"] == "conv3d":
        pos = q["n"] * out_extent(q, 0) * out_extent(q, 1) * out_extent(q, 2)
        return 2.0 * pos * q["cout"] * (q["cin"] // q["groups"]) * k
    pos = q["n"] * q["in"][0] * q["in"][1] * q["in"][2]
    return 2.0 * pos * q["cin"] * (q["cout"] // q["groups"]) * k


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters


def torch_case(q, iters):
    """A closure running the problem's direction in PyTorch, timed."""
    if q["pad_front"] != q["pad_back"]:
        return None  # PyTorch pads symmetrically
    dev, dt = "cuda", torch.bfloat16
    t = q["op"] == "conv_transpose3d"
    xs = (q["n"], q["cin"], *q["in"])
    ys = (q["n"], q["cout"], *[out_extent(q, a) for a in range(3)])
    ws = (q["cin"], q["cout"] // q["groups"], *q["kernel"]) if t else (q["cout"], q["cin"] // q["groups"], *q["kernel"])
    cl = torch.channels_last_3d
    x = torch.randn(xs, device=dev, dtype=dt).to(memory_format=cl)
    w = torch.randn(ws, device=dev, dtype=dt).to(memory_format=cl)
    dy = torch.randn(ys, device=dev, dtype=dt).to(memory_format=cl)
    b = torch.randn(q["cout"], device=dev, dtype=dt) if q["bias"] else None
    st, pd, dl, op, g = q["stride"], q["pad_front"], q["dilation"], q["output_padding"], q["groups"]
    if q["dir"] == "fwd":
        if t:
            return lambda: F.conv_transpose3d(x, w, b, st, pd, op, g, dl)
        return lambda: F.conv3d(x, w, b, st, pd, dl, g)
    mask = [True, False, False] if q["dir"] == "bwd_data" else [False, True, bool(q["bias"])]
    bias_sizes = [q["cout"]] if q["bias"] else None
    return lambda: torch.ops.aten.convolution_backward(dy, x, w, bias_sizes, st, pd, dl, t, op if t else [0, 0, 0],
                                                       g, mask)


def kgate_times(text):
    times, cur = {}, None
    for line in text.splitlines():
        if not line.startswith(" ") and line != "" and not line.startswith("backend"):
            cur = line.strip()
        m = re.match(r"\s+time ([0-9.eE+-]+) ms", line)
        if m and cur:
            times[cur] = float(m.group(1))
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="corpus/shapes.json")
    ap.add_argument("--config", default="A")
    ap.add_argument("--kgate-bench", default="")
    ap.add_argument("--kgate-output", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    probs = [p for p in json.load(open(a.corpus))["problems"]
             if p["config"] == a.config and p["op"].startswith("conv")]
    rows = []
    torch.backends.cudnn.benchmark = True
    for mode in ("bench", "det"):
        torch.use_deterministic_algorithms(mode == "det")
        torch.backends.cudnn.deterministic = mode == "det"
        for p in probs:
            fn = torch_case(p["problem"], a.iters)
            try:
                ms = time_ms(fn, a.iters) if fn else float("nan")
            except RuntimeError as e:  # e.g. no deterministic algorithm
                print(f"{mode} {p['descriptor']}: {e}", file=sys.stderr)
                ms = float("nan")
            print(f"{mode} {p['descriptor']} {ms:.4f} ms", file=sys.stderr, flush=True)
            if mode == "bench":
                rows.append({"descriptor": p["descriptor"], "op": p["op"], "calls": p["calls_per_step"],
                             "flops": flops(p["problem"]), "torch_ms": ms})
            else:
                next(r for r in rows if r["descriptor"] == p["descriptor"])["torch_det_ms"] = ms
    torch.use_deterministic_algorithms(False)
    text = ""
    if a.kgate_output:
        text = open(a.kgate_output).read()
    elif a.kgate_bench:
        run = subprocess.run([a.kgate_bench, "--iters", str(a.iters), *[r["descriptor"] for r in rows]],
                             capture_output=True, text=True)
        sys.stderr.write(run.stderr)
        text = run.stdout
    kg = kgate_times(text)
    for r in rows:
        r["kgate_ms"] = kg.get(r["descriptor"], float("nan"))
    print(f"{'problem':<78} {'calls':>5} {'cuDNN ms':>9} {'TF/s':>6} {'det ms':>9} {'kgate ms':>9} {'TF/s':>6} "
          f"{'ratio':>6}")
    for r in rows:
        tf = lambda ms: r["flops"] / (ms * 1e9)
        print(f"{r['descriptor']:<78} {r['calls']:>5} {r['torch_ms']:>9.3f} {tf(r['torch_ms']):>6.1f} "
              f"{r['torch_det_ms']:>9.3f} {r['kgate_ms']:>9.3f} {tf(r['kgate_ms']):>6.1f} "
              f"{r['torch_ms'] / r['kgate_ms']:>6.3f}")
    print("\nstep-weighted totals (sum calls x ms): operator  cuDNN  cuDNN-det  kgate  kgate speed / cuDNN")
    groups = sorted({r["op"] for r in rows}) + ["conv3d (fwd + bwd_data + bwd_weight)"]
    for gname in groups:
        sel = [r for r in rows if r["op"] == gname or (gname.startswith("conv3d (") and r["op"].startswith("conv3d."))]
        tt = sum(r["calls"] * r["torch_ms"] for r in sel)
        td = sum(r["calls"] * r["torch_det_ms"] for r in sel)
        tk = sum(r["calls"] * r["kgate_ms"] for r in sel)
        print(f"  {gname:<40} {tt:9.2f} {td:9.2f} {tk:9.2f}  {tt / tk if tk else float('nan'):.3f}x")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
