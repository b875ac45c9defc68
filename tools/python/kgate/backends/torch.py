"""The built-in PyTorch target of kgate's driver protocol (`kgate verify
--backend torch`, and the torch arms of `kgate bench`): the six conv
directions through torch.nn.functional's conv3d / conv_transpose3d and
autograd (which calls aten.convolution_backward: cuDNN or MIOpen on a GPU),
GroupNorm forward through aten.native_group_norm (mean and rstd included)
and backward through aten.native_group_norm_backward, a fused ReLU as
relu(group_norm(x)) and its gradient (aten.threshold_backward on the forward
output, recomputed from the fed mean and rstd).

Options (--backend-option KEY=VALUE):
  device            cuda | cpu (default: cuda when torch has it)
  channels_last_3d  1: tensors in torch.channels_last_3d memory format
  autocast          1: run under torch.autocast in the problem's input dtype
  cudnn_benchmark   1: torch.backends.cudnn.benchmark = True
  deterministic     1: torch.use_deterministic_algorithms(True)
  allow_tf32        0 | 1: torch.backends.cudnn.allow_tf32 (default: torch's)

run() and time() (kgate.driver's timed runs) compute through one step per
problem: the operands are put on the device, converted and laid out first;
the step is the direction's computation alone (a backward direction's
forward graph is built beforehand, so that the step is the backward a
training step runs; GroupNorm's forward widens x inside the step, as
autocast does on every call). time() times each step on its own: CUDA
events on a GPU, the wall clock on the CPU, after overwriting a flush
buffer of the requested size on the device.

Dtypes: kgate's tensors arrive in the problem's dtypes (bf16 as raw bits).
A problem whose output dtype is wider than its inputs (bf16:fp32) runs in
the output dtype on the exactly widened inputs, since torch's convolution
returns its input dtype; with autocast=1 such a convolution is declined
(autocast would compute it in the narrower input dtype). Asymmetric
padding: the input is zero-padded explicitly (forward) or the full
transposed output is cropped.
"""

import contextlib
import time as _clock

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
    if _OPTS["autocast"] == "1" and problem["src"] in ("bf16", "fp16") and problem["dst"] != problem["src"]:
        # Autocast's convolution returns its input dtype: the output would be
        # computed narrower than the problem asks for.
        return False, (f"autocast=1 computes the convolution in {problem['src']}, narrower than its "
                       f"{problem['dst']} output")
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


def _layout(t):
    """A tensor of the convolution's operands in the memory format the
    options ask for (channels_last_3d=1: channels-last; else contiguous)."""
    if _OPTS["channels_last_3d"] == "1":
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t.contiguous()


def _prepare_conv(p, inputs):
    """step(): computes the direction once on operands already on the
    device, in the compute dtype and memory format, and returns kgate's
    roles as device tensors. A backward direction's
    forward graph is built here, once: step() is the backward alone (as an
    autograd.grad with the graph retained), which is what a training step's
    backward runs."""
    dev = _OPTS["device"]
    src, dst = p["src"], p["dst"]
    compute = _TORCH[dst] if dst != src else _TORCH[src]
    t = {r: _to_torch(a, src, dev).to(compute) for r, a in inputs.items()}
    auto = _OPTS["autocast"] == "1" and src in ("bf16", "fp16")

    def forward_context():
        if auto:
            return torch.autocast(device_type=dev, dtype=_TORCH[src])
        return torch.no_grad() if p["dir"] == "fwd" else contextlib.nullcontext()

    if p["dir"] == "fwd":
        x, w, b = _ncdhw(t["x"]), _weight(t["w"]), t.get("b")

        def step():
            with forward_context():
                return {"y": _ndhwc(_conv(p, x, w, b))}
        return step

    dy = _ncdhw(t["dy"])
    if p["dir"] == "bwd_data":
        w = _weight(t["w"])
        # The input's shape: what the forward maps onto dy's shape.
        x = _layout(torch.zeros((p["n"], p["cin"], *p["in"]), dtype=compute, device=dev)).requires_grad_()
        with forward_context():
            y = _conv(p, x, w, None)

        def step():
            (dx,) = torch.autograd.grad(y, x, dy, retain_graph=True)
            return {"dx": _ndhwc(dx)}
        return step

    x = _ncdhw(t["x"])
    cin_w = p["cin"] if p["op"] == "conv_transpose3d" else p["cout"]
    per = (p["cout"] if p["op"] == "conv_transpose3d" else p["cin"]) // p["groups"]
    w = _layout(torch.zeros((cin_w, per, *p["kernel"]), dtype=compute, device=dev)).requires_grad_()
    b = torch.zeros((p["cout"],), dtype=compute, device=dev, requires_grad=True) if p["bias"] else None
    with forward_context():
        y = _conv(p, x, w, b)
    wanted = [w] + ([b] if b is not None else [])

    def step():
        grads = torch.autograd.grad(y, wanted, dy, retain_graph=True)
        out = {"dw": grads[0].permute(0, 2, 3, 4, 1)}
        if b is not None:
            out["db"] = grads[1]
        return out
    return step


def _prepare_groupnorm(p, inputs):
    """step() for GroupNorm: forward through aten.native_group_norm, whose
    input is widened inside the step (autocast widens group_norm's bf16
    input on every call of a training step); backward through
    aten.native_group_norm_backward on the fed mean and rstd, after
    aten.threshold_backward for a fused ReLU (its forward output, which a
    training step keeps, recomputed here from the fed statistics)."""
    dev = _OPTS["device"]
    n, c, g = p["n"], p["c"], p["groups"]
    hw = int(np.prod(p["spatial"]))
    spec = {**p["inputs"], **p["outputs"]}
    dt = lambda r: spec[r]["dtype"]  # noqa: E731
    # ATen's GroupNorm takes one dtype for x, dy, gamma and beta: the widest
    # of the problem's tensors (mixed bf16 / fp32 runs in fp32, the narrow
    # inputs widened exactly, the narrow outputs rounded once).
    compute = _TORCH[p["src"]]
    for r in spec:
        compute = torch.promote_types(compute, _TORCH[dt(r)])
    gamma = _to_torch(inputs["gamma"], dt("gamma"), dev).to(compute) if p["affine"] else None
    beta = _to_torch(inputs["beta"], dt("beta"), dev).to(compute) if p["affine"] else None
    eps = p["eps"]
    if p["dir"] == "fwd":
        x = _ncdhw(_to_torch(inputs["x"], dt("x"), dev))

        def step():
            with torch.no_grad():
                # A contiguous copy of a channels-last x, as F.group_norm
                # hands the kernel on a GPU.
                y, mean, rstd = torch.ops.aten.native_group_norm(
                    x.to(compute).contiguous(), gamma, beta, n, c, hw, g, eps)
                return {"y": _ndhwc(torch.relu(y) if p["relu"] else y), "mean": mean, "rstd": rstd}
        return step

    # Contiguous x and dy, as autograd hands them to the backward kernel.
    x = _ncdhw(_to_torch(inputs["x"], dt("x"), dev).to(compute)).contiguous()
    dy = _ncdhw(_to_torch(inputs["dy"], dt("dy"), dev).to(compute))
    mean = _to_torch(inputs["mean"], dt("mean"), dev).to(compute)
    rstd = _to_torch(inputs["rstd"], dt("rstd"), dev).to(compute)
    y = None
    if p["relu"]:
        with torch.no_grad():
            shape = (n, g, c // g, hw)
            xhat = (x.reshape(shape) - mean.reshape(n, g, 1, 1)) * rstd.reshape(n, g, 1, 1)
            y = xhat.reshape(x.shape)
            if gamma is not None:
                y = y * gamma.reshape(1, c, 1, 1, 1) + beta.reshape(1, c, 1, 1, 1)
    mask = [True, gamma is not None, gamma is not None]

    def step():
        with torch.no_grad():
            d = torch.ops.aten.threshold_backward(dy, y, 0) if y is not None else dy
            dx, dgamma, dbeta = torch.ops.aten.native_group_norm_backward(
                d.contiguous(), x, mean, rstd, gamma, n, c, hw, g, mask)
            out = {"dx": _ndhwc(dx)}
            if p["affine"]:
                out["dgamma"], out["dbeta"] = dgamma, dbeta
            return out
    return step


def _prepare(problem, inputs):
    if problem["op_dir"].startswith("groupnorm"):
        return _prepare_groupnorm(problem, inputs)
    return _prepare_conv(problem, inputs)


def _finish(problem, out):
    """A step's device tensors as NumPy arrays in the problem's output dtypes."""
    return {r: _to_numpy(v, problem["outputs"][r]["dtype"]) for r, v in out.items()}


_FLUSH = {}  # (device, bytes) -> the flush buffer, kept for the driver's life (one size at a time)


def _sync():
    if _OPTS["device"] == "cuda":
        torch.cuda.synchronize()


def _time_once(step, flush):
    """One step timed on its own: CUDA events around it on a GPU (the flush
    buffer overwritten before the start event), the wall clock on the CPU."""
    if flush is not None:
        flush.zero_()
    if _OPTS["device"] != "cuda":
        t0 = _clock.perf_counter()
        out = step()
        return out, (_clock.perf_counter() - t0) * 1e3
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = step()
    stop.record()
    stop.synchronize()
    return out, start.elapsed_time(stop)


def run(problem, inputs):
    out = _prepare(problem, inputs)()
    _sync()
    return _finish(problem, out)


def time(problem, inputs, timing):
    """kgate.driver's timed run: the operands are put on the device and laid
    out once; then `warmup` + `iters` steps, each timed on its own
    (_time_once) after a device buffer of `flush_bytes` is overwritten, the
    times of the first `warmup` dropped."""
    step = _prepare(problem, inputs)
    dev, nbytes = _OPTS["device"], timing["flush_bytes"]
    flush = None
    if nbytes:
        if (dev, nbytes) not in _FLUSH:
            _FLUSH.clear()
            _FLUSH[(dev, nbytes)] = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        flush = _FLUSH[(dev, nbytes)]
    _sync()
    # The warm-up runs are timed runs whose times are dropped: the first
    # timed run then follows one of its own kind (flush, events, sync).
    times = []
    for k in range(timing["warmup"] + timing["iters"]):
        out = None  # the last step's outputs freed first: every step finds the same free blocks
        out, ms = _time_once(step, flush)
        if k >= timing["warmup"]:
            times.append(ms)
    if dev == "cuda":
        what = f"CUDA events around each call (torch {torch.__version__}, {torch.cuda.get_device_name()})"
    else:
        what = f"wall clock around each call (torch {torch.__version__} on {dev}, {torch.get_num_threads()} threads)"
    if flush is not None:
        what += f"; {nbytes} bytes overwritten on the {dev} before each"
    return _finish(problem, out), times, what
