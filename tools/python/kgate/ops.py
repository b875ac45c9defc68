"""kgate's kernels in PyTorch, through kgate's C ABI (kernels/abi/kgate_ops.h)
loaded with ctypes: no compilation against torch, so one build serves any
torch version.

The library per device: CUDA tensors use libkgate_ops_cuda.so, CPU tensors
libkgate_ops_host.so (the host emulator: the same kernels, bit for bit,
slowly; for tests). Found through KGATE_OPS_LIB_CUDA / KGATE_OPS_LIB_HOST,
else beside the package (installed: <prefix>/lib; build tree:
build/kernels).

The autograd Functions take and return PyTorch's logical layouts (NCDHW
activations, [Cout][Cin/g][kD][kH][kW] weights); the kernels read the memory
of channels_last_3d tensors as NDHWC. Each call is one kgate problem
(a descriptor); workspace comes from torch's caching allocator, the launch
goes on the current CUDA stream, so CUDA graphs capture it.
"""

import ctypes
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
ABI_VERSION = 1


class KernelError(RuntimeError):
    """A kgate kernel launch failed (the message names the descriptor)."""


class Declined(Exception):
    """The kernel does not take this call (the reason says why)."""


class _Tensor(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_char_p),
                ("ndim", ctypes.c_int32), ("dims", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


def _candidates(backend):
    env = os.environ.get(f"KGATE_OPS_LIB_{backend.upper()}")
    if env:
        return [env]
    name = f"libkgate_ops_{backend}.so"
    return [os.path.join(_HERE, "..", "..", "..", name),                       # <prefix>/lib/python3/dist-packages/kgate
            os.path.join(_HERE, "..", "..", "..", "build", "kernels", name)]   # tools/python/kgate in the source tree


_LIBS = {}


def library(backend):
    """The loaded libkgate_ops_<backend>.so, or None with the reason in
    library_error(backend)."""
    if backend in _LIBS:
        return _LIBS[backend][0]
    lib, why = None, ""
    for path in _candidates(backend):
        if not os.path.exists(path):
            why = f"no {path}"
            continue
        try:
            lib = ctypes.CDLL(os.path.realpath(path))
        except OSError as e:
            why = f"cannot load {path}: {e}"
            continue
        lib.kgate_ops_abi_version.restype = ctypes.c_int32
        lib.kgate_ops_backend.restype = ctypes.c_char_p
        lib.kgate_ops_query.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint64),
                                        ctypes.c_char_p, ctypes.c_size_t]
        lib.kgate_ops_query.restype = ctypes.c_int32
        lib.kgate_ops_run.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Tensor), ctypes.c_int32, ctypes.c_void_p,
                                      ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.kgate_ops_run.restype = ctypes.c_int32
        if lib.kgate_ops_abi_version() != ABI_VERSION:
            why = f"{path} speaks ABI {lib.kgate_ops_abi_version()}, this package {ABI_VERSION}"
            lib = None
            continue
        break
    _LIBS[backend] = (lib, why)
    return lib


def library_error(backend):
    library(backend)
    return _LIBS[backend][1]


def backend_of(t):
    return "cuda" if t.is_cuda else "host" if t.device.type == "cpu" else None


_QUERIES = {}


def query(backend, descriptor):
    """(supported, reason, workspace bytes) of a descriptor."""
    key = (backend, descriptor)
    if key not in _QUERIES:
        lib = library(backend)
        ok, ws = ctypes.c_int32(0), ctypes.c_uint64(0)
        msg = ctypes.create_string_buffer(1024)
        st = lib.kgate_ops_query(descriptor.encode(), ctypes.byref(ok), ctypes.byref(ws), msg, 1024)
        if st != 0:
            raise ValueError(f"kgate: {descriptor}: {msg.value.decode()}")
        _QUERIES[key] = (bool(ok.value), msg.value.decode(), ws.value)
    return _QUERIES[key]


def ndhwc(t):
    """The NDHWC view of an NCDHW tensor (dense when t is channels_last_3d)."""
    return t.permute(0, 2, 3, 4, 1)


def _view(role, t):
    v = _Tensor()
    v.role = role.encode()
    v.data = t.data_ptr()
    v.dtype = _DTYPES[t.dtype].encode()
    v.ndim = t.dim()
    for i in range(t.dim()):
        v.dims[i] = t.shape[i]
        v.strides[i] = t.stride(i)
    return v


def run(descriptor, tensors, device):
    """Runs `descriptor` on `tensors` (role -> tensor in kgate's layout;
    outputs preallocated) on `device`'s current stream. Raises Declined for
    a decline, KernelError for a failed launch, ValueError for bad input."""
    backend = "cuda" if device.type == "cuda" else "host"
    lib = library(backend)
    ok, why, ws_bytes = query(backend, descriptor)
    if not ok:
        raise Declined(why)
    ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=device)
    views = (_Tensor * len(tensors))(*[_view(r, t) for r, t in tensors.items()])
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    msg = ctypes.create_string_buffer(2048)
    st = lib.kgate_ops_run(descriptor.encode(), views, len(tensors), ws.data_ptr(), ws_bytes, stream, msg, 2048)
    if st == 1:
        raise Declined(msg.value.decode())
    if st == 2:
        raise ValueError(f"kgate: {msg.value.decode()}")
    if st != 0:
        raise KernelError(f"kgate kernel launch failed: {msg.value.decode()}")


# ---------------------------------------------------------------------------
# Descriptors of PyTorch calls.

def _axes(prefix, v):
    return " ".join(f"{prefix}{a}{x}" for a, x in zip("dhw", v))


def conv_descriptor(op, direction, dtype, n, cin, cout, spatial, kernel, stride, pad_front, pad_back, dilation,
                    groups, bias, output_padding=(0, 0, 0)):
    d = (f"{op}.{direction} {dtype} n{n} c{cin} k{cout} {_axes('', spatial)} {_axes('k', kernel)} "
         f"{_axes('s', stride)} {_axes('dil', dilation)} "
         + " ".join(f"p{a}{f}:{b}" for a, f, b in zip("dhw", pad_front, pad_back)) + f" g{groups}")
    if op == "conv_transpose3d":
        d += " " + _axes("op", output_padding)
    if bias:
        d += " bias"
    return d


def groupnorm_descriptor(direction, src, dst, n, c, groups, spatial, eps, affine, relu):
    d = f"groupnorm.{direction} {src}:{dst} n{n} c{c} g{groups} {_axes('', spatial)} eps{eps!r}"
    if not affine:
        d += " noaffine"
    if relu:
        d += " relu"
    return d


def _cl(t):
    """t as a channels_last_3d-contiguous tensor (a copy only when it is not)."""
    return t.contiguous(memory_format=torch.channels_last_3d)


def _weight_kgate(w):
    """torch [A][B][kD][kH][kW] -> kgate's dense [A][kD][kH][kW][B]."""
    return _cl(w).permute(0, 2, 3, 4, 1)


def _empty_ncdhw(n, c, spatial, dtype, device):
    """An NCDHW tensor in channels_last_3d memory, and its NDHWC view."""
    t = torch.empty((n, c, *spatial), dtype=dtype, device=device, memory_format=torch.channels_last_3d)
    return t, ndhwc(t)


class ConvGeometry:
    """One conv3d / conv_transpose3d call's geometry, as kgate describes it."""

    def __init__(self, op, x_shape, w_shape, stride, pad_front, pad_back, dilation, groups, output_padding=(0, 0, 0)):
        self.op, self.groups = op, groups
        self.n, self.spatial = x_shape[0], tuple(x_shape[2:])
        self.kernel = tuple(w_shape[2:])
        if op == "conv3d":
            self.cin, self.cout = x_shape[1], w_shape[0]
        else:
            self.cin, self.cout = x_shape[1], w_shape[1] * groups
        self.stride, self.dilation = tuple(stride), tuple(dilation)
        self.pad_front, self.pad_back, self.output_padding = tuple(pad_front), tuple(pad_back), tuple(output_padding)

    def out_spatial(self):
        out = []
        for a in range(3):
            span = self.dilation[a] * (self.kernel[a] - 1) + 1
            if self.op == "conv3d":
                out.append((self.spatial[a] + self.pad_front[a] + self.pad_back[a] - span) // self.stride[a] + 1)
            else:
                out.append((self.spatial[a] - 1) * self.stride[a] - self.pad_front[a] - self.pad_back[a] + span
                           + self.output_padding[a])
        return tuple(out)

    def descriptor(self, direction, dtype, bias):
        return conv_descriptor(self.op, direction, dtype, self.n, self.cin, self.cout, self.spatial, self.kernel,
                               self.stride, self.pad_front, self.pad_back, self.dilation, self.groups, bias,
                               self.output_padding)


class ConvFunction(torch.autograd.Function):
    """conv3d or conv_transpose3d with kgate's kernels in every direction:
    forward (y), input gradient (bwd_data: dx), weight and bias gradients
    (bwd_weight: dw, db). x and the result are NCDHW in channels_last_3d
    memory."""

    @staticmethod
    def forward(ctx, x, w, b, geom):
        dtype = _DTYPES[x.dtype]
        xc, wk = _cl(x), _weight_kgate(w)
        y, y_nd = _empty_ncdhw(geom.n, geom.cout, geom.out_spatial(), x.dtype, x.device)
        t = {"x": ndhwc(xc), "w": wk, "y": y_nd}
        if b is not None:
            t["b"] = b.contiguous()
        run(geom.descriptor("fwd", dtype, b is not None), t, x.device)
        ctx.geom, ctx.has_bias = geom, b is not None
        ctx.save_for_backward(xc, w)
        return y

    @staticmethod
    def backward(ctx, gy):
        xc, w = ctx.saved_tensors
        geom = ctx.geom
        dtype = _DTYPES[xc.dtype]
        gyc = _cl(gy.to(xc.dtype))
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx, dx_nd = _empty_ncdhw(geom.n, geom.cin, geom.spatial, xc.dtype, xc.device)
            run(geom.descriptor("bwd_data", dtype, False), {"dy": ndhwc(gyc), "w": _weight_kgate(w), "dx": dx_nd},
                xc.device)
        if ctx.needs_input_grad[1] or (ctx.has_bias and ctx.needs_input_grad[2]):
            wshape = w.shape
            dwk = torch.empty((wshape[0], *wshape[2:], wshape[1]), dtype=xc.dtype, device=xc.device)
            t = {"x": ndhwc(xc), "dy": ndhwc(gyc), "dw": dwk}
            if ctx.has_bias:
                db = torch.empty((geom.cout,), dtype=xc.dtype, device=xc.device)
                t["db"] = db
            run(geom.descriptor("bwd_weight", dtype, ctx.has_bias), t, xc.device)
            dw = dwk.permute(0, 4, 1, 2, 3)
        return dx, dw, db, None


class GroupNormFunction(torch.autograd.Function):
    """GroupNorm (optionally with the fused ReLU) with kgate's kernels:
    forward (y, and the saved mean and rstd) and backward (dx, dgamma,
    dbeta). `out_dtype` is y's dtype (x's, or fp32 under autocast as
    PyTorch's group_norm); gamma and beta are fp32."""

    @staticmethod
    def forward(ctx, x, gamma, beta, groups, eps, relu, out_dtype):
        n, c = x.shape[0], x.shape[1]
        spatial = tuple(x.shape[2:])
        src, dst = _DTYPES[x.dtype], _DTYPES[out_dtype]
        affine = gamma is not None
        xc = _cl(x)
        y, y_nd = _empty_ncdhw(n, c, spatial, out_dtype, x.device)
        mean = torch.empty((n, groups), dtype=torch.float32, device=x.device)
        rstd = torch.empty((n, groups), dtype=torch.float32, device=x.device)
        t = {"x": ndhwc(xc), "y": y_nd, "mean": mean, "rstd": rstd}
        if affine:
            t["gamma"], t["beta"] = gamma.float().contiguous(), beta.float().contiguous()
        run(groupnorm_descriptor("fwd", src, dst, n, c, groups, spatial, eps, affine, relu), t, x.device)
        ctx.args = (groups, eps, relu, affine, src, dst, spatial)
        ctx.save_for_backward(xc, mean, rstd, t.get("gamma"), t.get("beta"))
        return y

    @staticmethod
    def backward(ctx, gy):
        xc, mean, rstd, gamma, beta = ctx.saved_tensors
        groups, eps, relu, affine, src, dst, spatial = ctx.args
        n, c = xc.shape[0], xc.shape[1]
        dyc = _cl(gy.to({"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dst]))
        dx, dx_nd = _empty_ncdhw(n, c, spatial, xc.dtype, xc.device)
        t = {"x": ndhwc(xc), "dy": ndhwc(dyc), "mean": mean, "rstd": rstd, "dx": dx_nd}
        dgamma = dbeta = None
        if affine:
            t["gamma"], t["beta"] = gamma, beta
            dgamma = torch.empty((c,), dtype=torch.float32, device=xc.device)
            dbeta = torch.empty((c,), dtype=torch.float32, device=xc.device)
            t["dgamma"], t["dbeta"] = dgamma, dbeta
        run(groupnorm_descriptor("bwd", src, dst, n, c, groups, spatial, eps, affine, relu), t, xc.device)
        return dx, dgamma, dbeta, None, None, None, None
