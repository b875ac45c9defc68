"""The PyTorch arms of `kgate bench` (torch, torch-det): a driver that speaks
one JSON object per line on stdin and answers one per line on stdout.

Requests:
  {"cmd": "hello", "flush_bytes": N}           -> {"info": "torch ... cudnn ... device"}
  {"cmd": "setup", "problem": {...}, "descriptor": "...", "variant": "torch"|"torch-det",
   "min_sample_ms": T, "flush": bool}          -> {"ok": true} or {"ok": false, "reason": "..."}
  {"cmd": "sample"}                            -> {"ms": time of one launch, mean over the sample}
Errors answer {"error": "..."}.

The problem is kgate's JSON (`kgate desc --json`). Activations are
channels_last_3d; with bf16 inputs the call runs under autocast(bfloat16) as
the U-Net trains (cuDNN conv3d / conv_transpose3d in bf16, group_norm in
fp32). torch-det turns deterministic algorithms on for the calls. Backward
directions time aten.convolution_backward with one output selected, and
autograd of relu(group_norm) for GroupNorm. Each launch is timed between its
own pair of CUDA events, after overwriting a flush buffer when "flush" is set
(the same cache treatment as kgate's arm).
"""
import json
import sys

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
state = {}


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def autocast_for(src):
    if src in ("bf16", "fp16"):
        return torch.autocast("cuda", dtype=DTYPES[src])
    return torch.autocast("cuda", enabled=False)


def make_groupnorm(p):
    n, c, g = p["n"], p["c"], p["groups"]
    d, h, w = p["spatial"]
    x = torch.randn(n, c, d, h, w, device="cuda", dtype=DTYPES[p["src"]])
    x = x.contiguous(memory_format=torch.channels_last_3d)
    weight = torch.randn(c, device="cuda") if p["affine"] else None
    bias = torch.randn(c, device="cuda") if p["affine"] else None
    relu, eps, src = p["relu"], p["eps"], p["src"]

    def fwd(xx, ww, bb):
        with autocast_for(src):
            y = F.group_norm(xx, g, ww, bb, eps)
            return F.relu(y) if relu else y

    if p["dir"] == "fwd":
        return lambda: fwd(x, weight, bias)
    xr = x.detach().requires_grad_()
    params = [xr] + ([weight.requires_grad_(), bias.requires_grad_()] if p["affine"] else [])
    y = fwd(xr, weight, bias)
    dy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, params, dy, retain_graph=True)


def make_conv(p):
    if p.get("form", "logical") != "logical":
        return None, "form=%s (the torch arm times logical shapes only)" % p["form"]
    if p["pad_front"] != p["pad_back"]:
        return None, "asymmetric padding (PyTorch's conv pads both sides alike)"
    transposed = p["op"] == "conv_transpose3d"
    n, cin, cout, groups = p["n"], p["cin"], p["cout"], p["groups"]
    kd, kh, kw = p["kernel"]
    dt = DTYPES[p["src"]]
    x = torch.randn(n, cin, *p["in"], device="cuda", dtype=dt).contiguous(memory_format=torch.channels_last_3d)
    wshape = (cin, cout // groups, kd, kh, kw) if transposed else (cout, cin // groups, kd, kh, kw)
    w = torch.randn(*wshape, device="cuda", dtype=dt).contiguous(memory_format=torch.channels_last_3d)
    b = torch.randn(cout, device="cuda", dtype=dt) if p["bias"] else None
    kw_args = dict(stride=p["stride"], padding=p["pad_front"], dilation=p["dilation"], groups=groups)
    src = p["src"]

    def fwd():
        with autocast_for(src):
            if transposed:
                return F.conv_transpose3d(x, w, b, output_padding=p["output_padding"], **kw_args)
            return F.conv3d(x, w, b, **kw_args)

    if p["dir"] == "fwd":
        return fwd, None
    with torch.no_grad():
        y = fwd()
    dy = torch.randn_like(y).contiguous(memory_format=torch.channels_last_3d)
    want_data = p["dir"] == "bwd_data"
    mask = [want_data, not want_data, (not want_data) and p["bias"]]
    xc, wc = x.to(y.dtype), w.to(y.dtype)

    def bwd():
        return torch.ops.aten.convolution_backward(
            dy, xc, wc, [cout] if p["bias"] else None, p["stride"], p["pad_front"], p["dilation"], transposed,
            p["output_padding"] if transposed else [0, 0, 0], groups, mask)

    return bwd, None


def time_once(fn):
    if state.get("flush") is not None:
        state["flush"].zero_()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def sample():
    fn, iters = state["fn"], state["iters"]
    det = state["deterministic"]
    torch.use_deterministic_algorithms(det)
    try:
        total = sum(time_once(fn) for _ in range(iters))
    finally:
        torch.use_deterministic_algorithms(False)
    return total / iters


def setup(req):
    p = req["problem"]
    state["deterministic"] = req["variant"] == "torch-det"
    state["use_flush"] = req.get("flush", True)
    if p["op"] == "groupnorm":
        fn, why = make_groupnorm(p), None
    else:
        fn, why = make_conv(p)
    if fn is None:
        return {"ok": False, "reason": why}
    state["fn"] = fn
    if not state["use_flush"]:
        state["flush"] = None
    else:
        state["flush"] = state.get("flush_buffer")
    state["iters"] = 1
    sample()  # warm-up (cuDNN algorithm choice, allocator) outside the numbers
    t1 = sample()
    state["iters"] = max(1, min(1000, int(req.get("min_sample_ms", 1.0) / max(t1, 1e-6) + 0.999)))
    return {"ok": True}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "hello":
                nbytes = int(req.get("flush_bytes", 0))
                state["flush_buffer"] = torch.empty(nbytes, dtype=torch.uint8, device="cuda") if nbytes else None
                answer({"info": "torch %s cudnn %s %s" % (torch.__version__, torch.backends.cudnn.version(),
                                                           torch.cuda.get_device_name())})
            elif cmd == "setup":
                answer(setup(req))
            elif cmd == "sample":
                answer({"ms": sample()})
            else:
                answer({"error": "unknown cmd %r" % cmd})
        except Exception as e:  # the C++ side reports it with the request
            answer({"error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
