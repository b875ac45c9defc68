"""PyTorch as the kernel under test: its float64 CPU conv3d,
conv_transpose3d and group_norm on kgate's inputs (channels-last tensors
permuted to PyTorch's logical NCDHW order), rounded once to the output
dtype, must pass kgate judge. Skipped, saying so, where torch is not
installed (it is optional: the package needs NumPy only)."""

import importlib
import importlib.util

import numpy as np
import pytest

import kgate

if importlib.util.find_spec("torch") is None:
    torch = None
    _WHY = "torch not installed: `import torch` finds no module (optional; pip install torch to run these)"
else:
    try:
        torch = importlib.import_module("torch")
        _WHY = ""
    except Exception as e:  # an installed but broken torch: say why
        torch = None
        _WHY = f"torch not importable: {type(e).__name__}: {e}"


@pytest.fixture
def F():
    if torch is None:
        pytest.skip(_WHY)
    return torch.nn.functional


def _t(inp, role):
    """kgate tensor -> float64 torch tensor in kgate's layout (exact)."""
    return torch.from_numpy(kgate.to_float64(inp[role], inp.manifest["tensors"][role]["dtype"]))


def _ncdhw(a):
    """NDHWC (or a kgate weight [A][KD][KH][KW][B]) -> PyTorch's logical
    order [N][C][D][H][W] (weight [A][B][KD][KH][KW]): a channels-last view."""
    return a.permute(0, 4, 1, 2, 3)


def _ndhwc(t, dtype):
    return kgate.round_to(t.permute(0, 2, 3, 4, 1).contiguous().numpy(), dtype)


def _out(descriptor, role="y"):
    return next(o["dtype"] for o in kgate.describe(descriptor)["outputs"] if o["role"] == role)


def torch_conv3d(inp, **kwargs):
    b = _t(inp, "b") if "b" in inp else None
    y = torch.nn.functional.conv3d(_ncdhw(_t(inp, "x")), _ncdhw(_t(inp, "w")), b, **kwargs)
    return {"y": _ndhwc(y, _out(inp.descriptor))}


def torch_conv_transpose3d(inp, **kwargs):
    b = _t(inp, "b") if "b" in inp else None
    y = torch.nn.functional.conv_transpose3d(_ncdhw(_t(inp, "x")), _ncdhw(_t(inp, "w")), b, **kwargs)
    return {"y": _ndhwc(y, _out(inp.descriptor))}


def torch_group_norm(inp, groups, eps, relu):
    F = torch.nn.functional
    x = _ncdhw(_t(inp, "x"))
    y = F.group_norm(x, groups, _t(inp, "gamma"), _t(inp, "beta"), eps=eps)
    if relu:
        y = F.relu(y)
    xr = x.reshape(x.shape[0], groups, -1)  # a group: C/G consecutive channels, all of space
    mean = xr.mean(dim=2)
    rstd = 1.0 / torch.sqrt(xr.var(dim=2, unbiased=False) + eps)
    d = inp.descriptor
    return {"y": _ndhwc(y, _out(d)), "mean": kgate.round_to(mean.numpy(), _out(d, "mean")),
            "rstd": kgate.round_to(rstd.numpy(), _out(d, "rstd"))}


CONV3D = [
    ("conv3d.fwd bf16:fp32 n2 c4 k6 g2 d5 h4 w6 kd3 kh2 kw1 sd2 sw2 dil2 p1 bias",
     dict(stride=(2, 1, 2), dilation=2, padding=1, groups=2)),
    ("conv3d.fwd fp32 n1 c3 k4 d4 kd3 p1", dict(stride=1, dilation=1, padding=1, groups=1)),
]
CONV_TRANSPOSE3D = [
    ("conv_transpose3d.fwd bf16 n1 c4 k6 g2 d3 kd3 s2 p1 op1 bias",
     dict(stride=2, padding=1, output_padding=1, groups=2)),
]
GROUP_NORM = [("groupnorm.fwd bf16:fp32 n2 c8 g2 d3 eps1e-3 relu", dict(groups=2, eps=1e-3, relu=True))]
FILLS = {"conv": ["lattice", "signed"], "groupnorm": ["gn_exact", "signed"]}


@pytest.mark.parametrize("fill", FILLS["conv"])
@pytest.mark.parametrize("descriptor, kwargs", CONV3D)
def test_torch_conv3d(F, kgate_check, descriptor, kwargs, fill):
    inp = kgate.inputs(descriptor, fill=fill)
    kgate_check(descriptor, inp, torch_conv3d(inp, **kwargs))


@pytest.mark.parametrize("fill", FILLS["conv"])
@pytest.mark.parametrize("descriptor, kwargs", CONV_TRANSPOSE3D)
def test_torch_conv_transpose3d(F, kgate_check, descriptor, kwargs, fill):
    inp = kgate.inputs(descriptor, fill=fill)
    kgate_check(descriptor, inp, torch_conv_transpose3d(inp, **kwargs))


@pytest.mark.parametrize("fill", FILLS["groupnorm"])
@pytest.mark.parametrize("descriptor, kwargs", GROUP_NORM)
def test_torch_group_norm(F, kgate_check, descriptor, kwargs, fill):
    inp = kgate.inputs(descriptor, fill=fill)
    kgate_check(descriptor, inp, torch_group_norm(inp, **kwargs))
