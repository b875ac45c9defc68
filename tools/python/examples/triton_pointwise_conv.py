"""A Triton kernel judged by kgate: a pointwise (1x1x1) conv3d forward,
NDHWC bf16 in, fp32 out, as one tl.dot GEMM [positions x Cin] x [Cin x Cout].

    PYTHONPATH=tools/python python3 tools/python/examples/triton_pointwise_conv.py \
        [--descriptor 'conv3d.fwd bf16:fp32 n1 c64 k64 d16 kd1'] [--model mma-sm90]

kgate writes the inputs (kgate.inputs), the kernel computes y, kgate judges
it (kgate.judge) on the exact lattice fill and a signed random fill, under
each accumulation model asked for; the verdict tables are printed. Needs a
CUDA GPU with Triton."""

import argparse
import sys

import numpy as np
import torch
import triton
import triton.language as tl

import kgate


@triton.jit
def pointwise_conv(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        # w is [Cout][Cin] (kgate's [Cout][1][1][1][Cin]): element (k, n) at n*K + k.
        b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, b)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(inputs, problem):
    x = torch.from_numpy(inputs["x"].view(np.int16)).view(torch.bfloat16).cuda()
    w = torch.from_numpy(inputs["w"].view(np.int16)).view(torch.bfloat16).cuda()
    cin, cout = problem["cin"], problem["cout"]
    m = x.numel() // cin
    y = torch.empty((m, cout), dtype=torch.float32, device="cuda")
    grid = (triton.cdiv(m, 64), triton.cdiv(cout, 64))
    pointwise_conv[grid](x, w, y, m, cout, cin, BM=64, BN=64, BK=32)
    torch.cuda.synchronize()
    return y.cpu().numpy().reshape(list(inputs["x"].shape[:-1]) + [cout])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--descriptor", default="conv3d.fwd bf16:fp32 n1 c64 k64 d16 kd1")
    ap.add_argument("--model", action="append", default=None)
    args = ap.parse_args()
    models = args.model or ["fp32-any-order", "mma-sm90"]
    worst = 0
    for fill in ("lattice", "signed"):
        inp = kgate.inputs(args.descriptor, fill=fill, seed=1)
        y = run(inp, inp.manifest["problem"])
        for model in models:
            r = kgate.judge(args.descriptor, inp, {"y": y}, model=model)
            print(f"--- {args.descriptor} fill {fill} model {model}: {r.state}")
            print(r)
            worst = max(worst, 0 if r.passed else 1)
    return worst


if __name__ == "__main__":
    sys.exit(main())
