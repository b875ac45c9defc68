"""The PyTorch arms of `kgate bench` (torch, torch-det): a driver that speaks
one JSON object per line on stdin and answers one per line on stdout.

Requests:
  {"cmd": "hello", "flush_bytes": N}           -> {"info": "torch ... cudnn ... device"}
  {"cmd": "setup", "problem": {...}, "descriptor": "...", "variant": "torch"|"torch-det",
   "min_sample_ms": T, "flush": bool, "inputs": {role: {"path", "dtype", "dims"}}}
                                               -> {"ok": true} or {"ok": false, "reason": "..."}
  {"cmd": "check", "out_dir": D, "outputs": {role: dtype}}
                                               -> {"outputs": {role: {"path", "dtype", "dims", "native_dtype"}}}
  {"cmd": "sample"}                            -> {"ms": time of one launch, mean over the sample}
Errors answer {"error": "..."}.

The problem is kgate's JSON (`kgate desc --json`). Inputs are kgate's own
(the same values its oracle judges): raw little-endian files in kgate's
layouts (activations N,D,H,W,C; weights C_small,KD,KH,KW,C_large/groups),
taken as channels_last_3d tensors. "check" runs the timed call once and
writes every output back in kgate's layout, converted to the dtype kgate asks
for; native_dtype is the dtype PyTorch produced (kgate does not judge an
output PyTorch computed narrower than the problem asks for). GroupNorm
forward's mean and rstd come from aten.native_group_norm, the kernel
F.group_norm calls; GroupNorm backward recomputes its own statistics from x
(the fed mean and rstd are not used).

With bf16 inputs the call runs under autocast(bfloat16) as the U-Net trains
(cuDNN conv3d / conv_transpose3d in bf16, group_norm in fp32). torch-det
turns deterministic algorithms on for the calls. Backward directions time
aten.convolution_backward with one output selected, and autograd of
relu(group_norm) for GroupNorm. Each launch is timed between its own pair of
CUDA events, after overwriting a flush buffer when "flush" is set (the same
cache treatment as kgate's arm). Without a GPU the driver runs on the CPU
(wall clock), for testing the protocol.
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
DNAMES = {v: k for k, v in DTYPES.items()}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
state = {}


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def autocast_for(src):
    if src in ("bf16", "fp16"):
        return torch.autocast(DEVICE, dtype=DTYPES[src])
    return torch.autocast(DEVICE, enabled=False)


def load(entry):
    """A kgate tensor file as a torch tensor on the device, in kgate's dims."""
    with open(entry["path"], "rb") as f:
        raw = bytearray(f.read())
    t = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["dims"])
    return t.to(DEVICE)


def to_torch(t):
    """kgate's channel-last 5-D layout as PyTorch's N,C,D,H,W view (channels_last_3d memory)."""
    return t.permute(0, 4, 1, 2, 3) if t.dim() == 5 else t


def to_kgate(t):
    """PyTorch's N,C,D,H,W (or O,I,KD,KH,KW) as kgate's channel-last layout, contiguous."""
    return (t.permute(0, 2, 3, 4, 1) if t.dim() == 5 else t).contiguous()


def given(inputs, role, make):
    return to_torch(load(inputs[role])) if role in inputs else make()


def make_groupnorm(p, inputs):
    n, c, g = p["n"], p["c"], p["groups"]
    d, h, w = p["spatial"]
    dt = DTYPES[p["src"]]
    x = given(inputs, "x", lambda: torch.randn(n, c, d, h, w, device=DEVICE, dtype=dt)
              .contiguous(memory_format=torch.channels_last_3d))
    weight = given(inputs, "gamma", lambda: torch.randn(c, device=DEVICE)) if p["affine"] else None
    bias = given(inputs, "beta", lambda: torch.randn(c, device=DEVICE)) if p["affine"] else None
    relu, eps, src = p["relu"], p["eps"], p["src"]

    def fwd(xx, ww, bb):
        with autocast_for(src):
            y = F.group_norm(xx, g, ww, bb, eps)
            return F.relu(y) if relu else y

    if p["dir"] == "fwd":
        def outputs():
            # The aten kernel F.group_norm calls, on a contiguous copy (it
            # takes no channels-last view; the values do not depend on it).
            y, mean, rstd = torch.ops.aten.native_group_norm(x.float().contiguous(), weight, bias, n, c, d * h * w, g, eps)
            return {"y": F.relu(y) if relu else y, "mean": mean, "rstd": rstd}
        return (lambda: fwd(x, weight, bias)), outputs
    xr = x.detach().requires_grad_()
    params = [xr] + ([weight.requires_grad_(), bias.requires_grad_()] if p["affine"] else [])
    y = fwd(xr, weight, bias)
    dy = given(inputs, "dy", lambda: torch.randn_like(y)).to(y.dtype)
    step = lambda: torch.autograd.grad(y, params, dy, retain_graph=True)

    def outputs():
        r = step()
        out = {"dx": r[0]}
        if p["affine"]:
            out["dgamma"], out["dbeta"] = r[1], r[2]
        return out
    return step, outputs


def make_conv(p, inputs):
    if p.get("form", "logical") != "logical":
        return None, None, "form=%s (the torch arm times logical shapes only)" % p["form"]
    if p["pad_front"] != p["pad_back"]:
        return None, None, "asymmetric padding (PyTorch's conv pads both sides alike)"
    transposed = p["op"] == "conv_transpose3d"
    n, cin, cout, groups = p["n"], p["cin"], p["cout"], p["groups"]
    kd, kh, kw = p["kernel"]
    dt = DTYPES[p["src"]]
    cl = torch.channels_last_3d
    x = given(inputs, "x", lambda: torch.randn(n, cin, *p["in"], device=DEVICE, dtype=dt).contiguous(memory_format=cl))
    wshape = (cin, cout // groups, kd, kh, kw) if transposed else (cout, cin // groups, kd, kh, kw)
    w = given(inputs, "w", lambda: torch.randn(*wshape, device=DEVICE, dtype=dt).contiguous(memory_format=cl))
    b = given(inputs, "b", lambda: torch.randn(cout, device=DEVICE, dtype=dt)) if p["bias"] else None
    kw_args = dict(stride=p["stride"], padding=p["pad_front"], dilation=p["dilation"], groups=groups)
    src = p["src"]

    def fwd():
        with autocast_for(src):
            if transposed:
                return F.conv_transpose3d(x, w, b, output_padding=p["output_padding"], **kw_args)
            return F.conv3d(x, w, b, **kw_args)

    if p["dir"] == "fwd":
        return fwd, (lambda: {"y": fwd()}), None
    with torch.no_grad():
        y = fwd()
    dy = given(inputs, "dy", lambda: torch.randn_like(y).contiguous(memory_format=cl)).to(y.dtype)
    want_data = p["dir"] == "bwd_data"
    mask = [want_data, not want_data, (not want_data) and p["bias"]]
    xc, wc = x.to(y.dtype), w.to(y.dtype)

    def bwd():
        return torch.ops.aten.convolution_backward(
            dy, xc, wc, [cout] if p["bias"] else None, p["stride"], p["pad_front"], p["dilation"], transposed,
            p["output_padding"] if transposed else [0, 0, 0], groups, mask)

    def outputs():
        r = bwd()
        if want_data:
            return {"dx": r[0]}
        out = {"dw": r[1]}
        if p["bias"]:
            out["db"] = r[2]
        return out

    return bwd, outputs, None


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def time_once(fn):
    if state.get("flush") is not None:
        state["flush"].zero_()
    if DEVICE != "cuda":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def with_determinism(f):
    torch.use_deterministic_algorithms(state["deterministic"])
    try:
        return f()
    finally:
        torch.use_deterministic_algorithms(False)


def sample():
    fn, iters = state["fn"], state["iters"]
    return with_determinism(lambda: sum(time_once(fn) for _ in range(iters)) / iters)


def setup(req):
    p = req["problem"]
    inputs = req.get("inputs", {})
    state["deterministic"] = req["variant"] == "torch-det"
    state["use_flush"] = req.get("flush", True)
    if p["op"] == "groupnorm":
        (fn, outputs), why = make_groupnorm(p, inputs), None
    else:
        fn, outputs, why = make_conv(p, inputs)
    if fn is None:
        return {"ok": False, "reason": why}
    state["fn"], state["outputs"] = fn, outputs
    state["flush"] = state.get("flush_buffer") if state["use_flush"] else None
    state["iters"] = 1
    sample()  # warm-up (cuDNN algorithm choice, allocator) outside the numbers
    t1 = sample()
    state["iters"] = max(1, min(1000, int(req.get("min_sample_ms", 1.0) / max(t1, 1e-6) + 0.999)))
    return {"ok": True}


def check(req):
    out = with_determinism(state["outputs"])
    sync()
    written = {}
    for role, dtype in req["outputs"].items():
        if role not in out:
            continue
        t = out[role].detach()
        native = DNAMES.get(t.dtype, str(t.dtype))
        t = to_kgate(t.to(DTYPES[dtype])).cpu()
        path = os.path.join(req["out_dir"], "torch-%s.bin" % role)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        os.replace(tmp, path)
        written[role] = {"path": path, "dtype": dtype, "dims": list(t.shape), "native_dtype": native}
    return {"outputs": written}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "hello":
                nbytes = int(req.get("flush_bytes", 0))
                state["flush_buffer"] = torch.empty(nbytes, dtype=torch.uint8, device=DEVICE) if nbytes else None
                where = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (%d threads)" % torch.get_num_threads()
                answer({"info": "torch %s cudnn %s %s" % (torch.__version__, torch.backends.cudnn.version(), where)})
            elif cmd == "setup":
                answer(setup(req))
            elif cmd == "check":
                answer(check(req))
            elif cmd == "sample":
                answer({"ms": sample()})
            else:
                answer({"error": "unknown cmd %r" % cmd})
        except Exception as e:  # the C++ side reports it with the request
            answer({"error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
