"""Drop-in modules: FastConv3d, FastConvTranspose3d, FastGroupNorm(relu=True)
replace nn.Conv3d, nn.ConvTranspose3d and nn.GroupNorm(+ReLU) with the same
parameters under the same names (a state_dict loads both ways).

Each call climbs a ladder: kgate's kernel, else stock PyTorch, decided per
call; the first rung that refuses says why, in this order:
  1. disabled: KGATE_DISABLE=1 in the environment;
  2. layout: the input not channels_last_3d-contiguous, or not 16-byte aligned;
  3. dtype or device: not fp32 / bf16 / fp16, not CPU or CUDA, or no kgate
     library for the device;
  4. transform: a torch.func transform (vmap, grad, ...) is active;
  5. kernel: the kernel's own is_supported declines the problem.
report() says which calls each rung served, per module kind.
"""

import collections
import os

import torch
import torch.nn.functional as F
from torch import nn

from . import ops

_REPORT = collections.Counter()


def report(reset=False):
    """{(module kind, "kgate" | "torch: <rung>: <reason>"): calls} since the
    last reset."""
    r = dict(_REPORT)
    if reset:
        _REPORT.clear()
    return r


def _transform_active():
    try:
        return torch._C._functorch.peek_interpreter_stack() is not None
    except AttributeError:  # a torch without torch.func
        return False


def _refusal(tensors):
    """The first rung refusing `tensors` (the call's inputs), or None."""
    if os.environ.get("KGATE_DISABLE", "") not in ("", "0"):
        return "disabled: KGATE_DISABLE is set"
    # The activation is read in place; weights and affine parameters are
    # small and copied into kgate's layout when they are not in it.
    name, x = tensors[0]
    if x.dim() == 5 and not x.is_contiguous(memory_format=torch.channels_last_3d):
        return f"layout: {name} is not channels_last_3d-contiguous"
    if x.data_ptr() % 16:
        return f"layout: {name} is not 16-byte aligned"
    for name, t in tensors:
        if t is None:
            continue
        if t.device != x.device:
            return f"device: {name} is on {t.device}, {tensors[0][0]} on {x.device}"
        if t.dtype not in ops._DTYPES:
            return f"dtype: {name} is {t.dtype}"
        backend = ops.backend_of(t)
        if backend is None:
            return f"device: {name} is on {t.device}"
        if ops.library(backend) is None:
            return f"device: no kgate library for {t.device} ({ops.library_error(backend)})"
    if _transform_active():
        return "transform: a torch.func transform is active"
    return None


def _count(kind, rung):
    _REPORT[(kind, rung)] += 1


def _autocast(x):
    """The dtype autocast runs a convolution in here, or None."""
    if x.is_cuda and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    if x.device.type == "cpu" and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


def _pads(module, kernel):
    """(front, back) padding per axis of a conv module, 'same' included."""
    p = module.padding
    if isinstance(p, str):
        if p == "valid":
            return (0, 0, 0), (0, 0, 0)
        total = [module.dilation[a] * (kernel[a] - 1) for a in range(3)]
        front = tuple(t // 2 for t in total)
        return front, tuple(t - f for t, f in zip(total, front))
    return tuple(p), tuple(p)


def _kgate_conv(kind, x, w, b, geometry):
    """One conv module call on kgate's kernel, under autocast as PyTorch's
    (inputs and parameters cast to the autocast dtype); None, after
    counting the rung that refused, when it falls back. geometry(x, w)
    gives the call's ops.ConvGeometry."""
    cast = _autocast(x)
    if cast is not None:
        x, w = x.to(cast), w.to(cast)
        b = b.to(cast) if b is not None else None
    why = _refusal([("x", x), ("weight", w), ("bias", b)])
    if why is None and not (x.dtype == w.dtype and (b is None or b.dtype == w.dtype)):
        why = f"dtype: x {x.dtype}, weight {w.dtype}"
    if why is None:
        geom = geometry(x, w)
        ok, reason, _ = ops.query(ops.backend_of(x), geom.descriptor("fwd", ops._DTYPES[x.dtype], b is not None))
        if ok:
            _count(kind, "kgate")
            with torch.autocast(device_type=x.device.type, enabled=False):
                return ops.ConvFunction.apply(x, w, b, geom)
        why = f"kernel: {reason}"
    _count(kind, f"torch: {why}")
    return None


class FastConv3d(nn.Conv3d):
    """nn.Conv3d on kgate's kernels (forward, input, weight and bias gradients)."""

    def forward(self, x):
        if self.padding_mode != "zeros":
            _count("conv3d", f"torch: mode: padding_mode {self.padding_mode}")
            return super().forward(x)
        front, back = _pads(self, self.kernel_size)
        y = _kgate_conv("conv3d", x, self.weight, self.bias,
                        lambda xin, w: ops.ConvGeometry("conv3d", xin.shape, w.shape, self.stride, front, back,
                                                        self.dilation, self.groups))
        return y if y is not None else super().forward(x)


class FastConvTranspose3d(nn.ConvTranspose3d):
    """nn.ConvTranspose3d on kgate's kernels (every direction)."""

    def forward(self, x, output_size=None):
        if output_size is not None or self.padding_mode != "zeros":
            _count("conv_transpose3d", "torch: mode: output_size or padding_mode given")
            return super().forward(x, output_size)
        y = _kgate_conv("conv_transpose3d", x, self.weight, self.bias,
                        lambda xin, w: ops.ConvGeometry("conv_transpose3d", xin.shape, w.shape, self.stride,
                                                        self.padding, self.padding, self.dilation, self.groups,
                                                        self.output_padding))
        return y if y is not None else super().forward(x, output_size)


class FastGroupNorm(nn.GroupNorm):
    """nn.GroupNorm, and with relu=True relu(group_norm(x)) fused, on kgate's
    kernels. Under autocast the result is fp32, as PyTorch's group_norm's."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, relu=False):
        super().__init__(num_groups, num_channels, eps=eps, affine=affine, device=device, dtype=dtype)
        self.relu = relu

    def _stock(self, x):
        y = super().forward(x)
        return F.relu(y) if self.relu else y

    def forward(self, x):
        kind = "groupnorm+relu" if self.relu else "groupnorm"
        if x.dim() != 5:
            _count(kind, f"torch: layout: {x.dim()}-d input")
            return self._stock(x)
        out_dtype = torch.float32 if _autocast(x) is not None else x.dtype
        why = _refusal([("x", x), ("weight", self.weight), ("bias", self.bias)])
        if why is None:
            n, c = x.shape[0], x.shape[1]
            d = ops.groupnorm_descriptor("fwd", ops._DTYPES[x.dtype], ops._DTYPES[out_dtype], n, c, self.num_groups,
                                         tuple(x.shape[2:]), self.eps, self.affine, self.relu)
            ok, reason, _ = ops.query(ops.backend_of(x), d)
            if ok:
                _count(kind, "kgate")
                return ops.GroupNormFunction.apply(x, self.weight, self.bias, self.num_groups, self.eps, self.relu,
                                                   out_dtype)
            why = f"kernel: {reason}"
        _count(kind, f"torch: {why}")
        return self._stock(x)

    def extra_repr(self):
        return super().extra_repr() + (", relu=True" if self.relu else "")
