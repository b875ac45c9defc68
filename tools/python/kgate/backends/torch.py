"""The built-in PyTorch target of kgate's driver protocol (`kgate verify
--backend torch`): the six conv directions through torch.nn.functional's
conv3d / conv_transpose3d and autograd (which calls
aten.convolution_backward: cuDNN or MIOpen on a GPU), GroupNorm forward
through aten.native_group_norm (mean and rstd included) and backward
through aten.native_group_norm_backward, a fused ReLU as
relu(group_norm(x)) and its gradient (dy masked where the forward output,
recomputed from the fed mean and rstd, is not positive).

Options (--backend-option KEY=VALUE):
  device            cuda | cpu (default: cuda when torch has it)
  channels_last_3d  1: tensors in torch.channels_last_3d memory format
  autocast          1: run under torch.autocast in the problem's input dtype
  cudnn_benchmark   1: torch.backends.cudnn.benchmark = True
  deterministic     1: torch.use_deterministic_algorithms(True)
  allow_tf32        0 | 1: torch.backends.cudnn.allow_tf32 (default: torch's)

Dtypes: kgate's tensors arrive in the problem's dtypes (bf16 as raw bits).
A problem whose output dtype is wider than its inputs (bf16:fp32) runs in
the output dtype on the exactly widened inputs, since torch's convolution
returns its input dtype. Asymmetric padding: the input is zero-padded
explicitly (forward) or the full transposed output is cropped.
"""

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # said in the handshake
    raise ImportError(f"--backend torch needs PyTorch: {e}") from e

from kgate.driver import Declined

_OPTS = {"device": None, "channels_last_3d": "0", "autocast": "0", "cudnn_benchmark": "0", "deterministic": "0",
         "allow_tf32": None}
_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def configure(options):
    unknown = set(options) - set(_OPTS)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(_OPTS)})")
    _OPTS.update(options)
    if _OPTS["device"] is None:
        _OPTS["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    if _OPTS["device"] == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch has no CUDA device")
    torch.backends.cudnn.benchmark = _OPTS["cudnn_benchmark"] == "1"
    if _OPTS["deterministic"] == "1":
        torch.use_deterministic_algorithms(True)
    if _OPTS["allow_tf32"] is not None:
        torch.backends.cudnn.allow_tf32 = _OPTS["allow_tf32"] == "1"
        torch.backends.cuda.matmul.allow_tf32 = _OPTS["allow_tf32"] == "1"


def describe():
    dev = _OPTS["device"]
    what = f"torch {torch.__version__} on {dev}"
    if dev == "cuda":
        what += f" ({torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()})"
    flags = [k for k in ("channels_last_3d", "autocast", "cudnn_benchmark", "deterministic") if _OPTS[k] == "1"]
    if _OPTS["allow_tf32"] is not None:
        flags.append(f"allow_tf32={_OPTS['allow_tf32']}")
    return what + (", " + ", ".join(flags) if flags else "")


def supports(problem):
    op = problem["op_dir"]
    if op.startswith("groupnorm"):
        return True, ""
    if problem["src"] == "fp64" or problem["dst"] == "fp64":
        return False, "fp64 is not a dtype kgate's problems use"
    return True, ""


def _to_torch(a, dtype, dev):
    if dtype == "bf16":
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(dev)


def _to_numpy(t, dtype):
    t = t.detach().to("cpu").contiguous()
    if dtype == "bf16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return t.to(_TORCH[dtype]).numpy()


def _ncdhw(t):
    """NDHWC tensor -> NCDHW view (channels_last_3d memory: a view, no copy)."""
    t = t.permute(0, 4, 1, 2, 3)
    return t if _OPTS["channels_last_3d"] == "1" else t.contiguous()


def _ndhwc(t):
    return t.permute(0, 2, 3, 4, 1)


def _weight(t):
    """kgate [A][KD][KH][KW][B] -> torch [A][B][KD][KH][KW]."""
    w = t.permute(0, 4, 1, 2, 3)
    if _OPTS["channels_last_3d"] == "1":
        return w.contiguous(memory_format=torch.channels_last_3d)
    return w.contiguous()


def _conv(p, x, w, b):
    """PyTorch's conv3d / conv_transpose3d with kgate's (possibly
    asymmetric) padding; x NCDHW."""
    stride, dil, g = p["stride"], p["dilation"], p["groups"]
    pf, pb = p["pad_front"], p["pad_back"]
    if p["op"] == "conv3d":
        pad = []
        for a in (2, 1, 0):  # F.pad lists the last axis first
            pad += [pf[a], pb[a]]
        xp = F.pad(x, pad) if any(pad) else x
        return F.conv3d(xp, w, b, stride=stride, padding=0, dilation=dil, groups=g)
    op = p["output_padding"]
    full = F.conv_transpose3d(x, w, b, stride=stride, padding=0, output_padding=op, dilation=dil, groups=g)
    sl = [slice(None), slice(None)]
    for a in range(3):
        sl.append(slice(pf[a], full.shape[2 + a] - pb[a]))
    return full[tuple(sl)]


def _run_conv(p, inputs):
    dev = _OPTS["device"]
    src, dst = p["src"], p["dst"]
    compute = _TORCH[dst] if dst != src else _TORCH[src]
    t = {r: _to_torch(a, src, dev).to(compute) for r, a in inputs.items()}
    auto = _OPTS["autocast"] == "1" and src in ("bf16", "fp16")
    ctx = torch.autocast(device_type=dev, dtype=_TORCH[src]) if auto else torch.no_grad() if p["dir"] == "fwd" else None
    out = {}

    def body():
        if p["dir"] == "fwd":
            y = _conv(p, _ncdhw(t["x"]), _weight(t["w"]), t.get("b"))
            out["y"] = _ndhwc(y)
            return
        if p["dir"] == "bwd_data":
            dy = _ncdhw(t["dy"])
            w = _weight(t["w"])
            # The input's shape: what the forward maps onto dy's shape.
            spatial = p["in"]
            x = torch.zeros((p["n"], p["cin"], *spatial), dtype=compute, device=dev, requires_grad=True)
            y = _conv(p, x, w, None)
            (dx,) = torch.autograd.grad(y, x, dy)
            out["dx"] = _ndhwc(dx)
            return
        x = _ncdhw(t["x"])
        dy = _ncdhw(t["dy"])
        cin_w = p["cin"] if p["op"] == "conv_transpose3d" else p["cout"]
        k = p["kernel"]
        per = (p["cout"] if p["op"] == "conv_transpose3d" else p["cin"]) // p["groups"]
        w = torch.zeros((cin_w, per, *k), dtype=compute, device=dev, requires_grad=True)
        b = torch.zeros((p["cout"],), dtype=compute, device=dev, requires_grad=True) if p["bias"] else None
        y = _conv(p, x, w, b)
        grads = torch.autograd.grad(y, [w] + ([b] if b is not None else []), dy)
        out["dw"] = grads[0].permute(0, 2, 3, 4, 1)
        if b is not None:
            out["db"] = grads[1]

    if ctx is None:
        body()
    else:
        with ctx:
            body()
    return {r: _to_numpy(v, p["outputs"][r]["dtype"]) for r, v in out.items()}


def _run_groupnorm(p, inputs):
    dev = _OPTS["device"]
    src, dst = p["src"], p["dst"]
    n, c, g = p["n"], p["c"], p["groups"]
    hw = int(np.prod(p["spatial"]))
    spec = {**p["inputs"], **p["outputs"]}
    dt = lambda r: spec[r]["dtype"]  # noqa: E731
    # ATen's GroupNorm takes one dtype for x, dy, gamma and beta: the widest
    # of the problem's tensors (mixed bf16 / fp32 runs in fp32, the narrow
    # inputs widened exactly, the narrow outputs rounded once).
    compute = _TORCH[src]
    for r in spec:
        compute = torch.promote_types(compute, _TORCH[dt(r)])
    x = _ncdhw(_to_torch(inputs["x"], dt("x"), dev).to(compute))
    gamma = _to_torch(inputs["gamma"], dt("gamma"), dev).to(compute) if p["affine"] else None
    beta = _to_torch(inputs["beta"], dt("beta"), dev).to(compute) if p["affine"] else None
    eps = p["eps"]
    with torch.no_grad():
        if p["dir"] == "fwd":
            y, mean, rstd = torch.ops.aten.native_group_norm(x, gamma, beta, n, c, hw, g, eps)
            if p["relu"]:
                y = torch.relu(y)
            return {"y": _to_numpy(_ndhwc(y), dt("y")), "mean": _to_numpy(mean, dt("mean")),
                    "rstd": _to_numpy(rstd, dt("rstd"))}
        dy = _ncdhw(_to_torch(inputs["dy"], dt("dy"), dev).to(compute))
        mean = _to_torch(inputs["mean"], dt("mean"), dev).to(compute)
        rstd = _to_torch(inputs["rstd"], dt("rstd"), dev).to(compute)
        if p["relu"]:
            shape = (n, g, c // g, hw)
            xhat = (x.reshape(shape) - mean.reshape(n, g, 1, 1)) * rstd.reshape(n, g, 1, 1)
            yv = xhat.reshape(x.shape)
            if gamma is not None:
                yv = yv * gamma.reshape(1, c, 1, 1, 1) + beta.reshape(1, c, 1, 1, 1)
            dy = dy * (yv > 0).to(dy.dtype)
        dx, dgamma, dbeta = torch.ops.aten.native_group_norm_backward(
            dy.contiguous(), x.contiguous(), mean, rstd, gamma, n, c, hw, g, [True, gamma is not None, gamma is not None])
        out = {"dx": _to_numpy(_ndhwc(dx), dt("dx"))}
        if p["affine"]:
            out["dgamma"] = _to_numpy(dgamma, dt("dgamma"))
            out["dbeta"] = _to_numpy(dbeta, dt("dbeta"))
        return out


def run(problem, inputs):
    if problem["op_dir"].startswith("groupnorm"):
        return _run_groupnorm(problem, inputs)
    return _run_conv(problem, inputs)
