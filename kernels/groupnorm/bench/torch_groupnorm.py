"""PyTorch's F.group_norm on the configuration-A GroupNorm shapes, the
comparison arm for kgate's GroupNorm kernels (run on the NVIDIA machine).

Channels-last-3d bf16 activations; 8 groups, affine, eps 1e-5, ReLU after.
Two forms: autocast's (group_norm runs in fp32: the bf16 input is cast, the
output is fp32, as the U-Net trains) and bf16 native. Prints ms per call
(CUDA events, mean of ITERS after warm-up) for forward and forward+backward.
"""
import sys

import torch
import torch.nn.functional as F

ITERS = 20
SHAPES = [(64, 128), (128, 64), (256, 32), (512, 16), (1024, 8)]


def timed(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / ITERS


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} {torch.cuda.get_device_name()}")
    for c, s in SHAPES:
        x = torch.randn(1, c, s, s, s, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last_3d)
        w = torch.randn(c, device="cuda")
        b = torch.randn(c, device="cuda")
        fwd_autocast = timed(lambda: F.relu(F.group_norm(x.float(), 8, w, b, 1e-5)))
        fwd_bf16 = timed(lambda: F.relu(F.group_norm(x, 8, w.bfloat16(), b.bfloat16(), 1e-5)))
        xr = x.float().detach().requires_grad_()
        wr = w.detach().requires_grad_()
        br = b.detach().requires_grad_()
        y = F.relu(F.group_norm(xr, 8, wr, br, 1e-5))
        dy = torch.randn_like(y)
        bwd_autocast = timed(lambda: torch.autograd.grad(y, (xr, wr, br), dy, retain_graph=True))
        print(f"groupnorm c{c} d{s}: fwd autocast {fwd_autocast:.4f} ms, fwd bf16 {fwd_bf16:.4f} ms, "
              f"bwd autocast {bwd_autocast:.4f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
