"""One U-Net-shaped layer's training step (forward and backward) with kgate's
modules against stock PyTorch, on a CUDA GPU, bf16 in channels_last_3d:
FastConv3d vs nn.Conv3d (cuDNN), FastGroupNorm(relu=True) vs
relu(nn.GroupNorm) (ATen). Median of timed iterations (CUDA events), and a
check that both give the same loss to bf16 accuracy.

    PYTHONPATH=tools/python python3 tools/python/examples/modules_speed.py
"""

import statistics
import sys

import torch

from kgate import nn as knn


def time_step(m, x, iters=30):
    for _ in range(5):
        y = m(x)
        y.float().sum().backward()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y = m(x)
        y.float().sum().backward()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    cases = []
    for c, d in ((64, 32), (128, 16), (256, 8)):
        conv = torch.nn.Conv3d(c, c, 3, padding=1).to(dev).bfloat16().to(memory_format=torch.channels_last_3d)
        fast = knn.FastConv3d(c, c, 3, padding=1).to(dev).bfloat16().to(memory_format=torch.channels_last_3d)
        fast.load_state_dict(conv.state_dict())
        cases.append((f"conv3d k3 c{c} d{d}", conv, fast, (1, c, d, d, d)))
        gn = torch.nn.Sequential(torch.nn.GroupNorm(8, c), torch.nn.ReLU()).to(dev)
        fgn = knn.FastGroupNorm(8, c, relu=True).to(dev)
        cases.append((f"groupnorm+relu c{c} d{d}", gn, fgn, (1, c, d, d, d)))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'layer':28s} {'stock ms':>9s} {'kgate ms':>9s} {'ratio':>7s}  loss stock / kgate")
    knn.report(reset=True)
    for name, stock, fast, shape in cases:
        x = torch.randn(shape, device=dev).bfloat16().contiguous(memory_format=torch.channels_last_3d).requires_grad_(True)
        ts, tk = time_step(stock, x), time_step(fast, x)
        with torch.no_grad():
            ls, lk = stock(x).float().square().mean().item(), fast(x).float().square().mean().item()
        print(f"{name:28s} {ts:9.3f} {tk:9.3f} {ts / tk:7.3f}  {ls:.6g} / {lk:.6g}")
    print("rungs:", knn.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
