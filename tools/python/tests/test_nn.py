"""kgate's PyTorch modules and autograd Functions (kgate.nn, kgate.ops) on
the CPU through libkgate_ops_host.so (the host emulator: kgate's kernels
bit for bit): every direction judged by `kgate judge` on kgate's own
inputs, the ladder's refusals in order, state_dict both ways, determinism.
Skipped, saying so, where torch is missing."""

import os
import sys

import numpy as np
import pytest

import kgate

torch = pytest.importorskip("torch", reason=f"torch not installed for {sys.executable}: kgate.nn is not tested")

from kgate import nn as knn  # noqa: E402
from kgate import ops  # noqa: E402

if ops.library("host") is None:
    pytest.skip(f"libkgate_ops_host.so not found ({ops.library_error('host')})", allow_module_level=True)

TORCH_DT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def t_of(a, dtype):
    """A kgate array (NDHWC, bf16 as uint16) as a torch tensor of dtype."""
    if dtype == "bf16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def np_of(t, dtype):
    t = t.detach().contiguous()
    if dtype == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def ncdhw(t):
    """NDHWC tensor -> NCDHW tensor in channels_last_3d memory (a view)."""
    return t.permute(0, 4, 1, 2, 3)


def torch_weight(t):
    """kgate [A][kD][kH][kW][B] -> torch [A][B][kD][kH][kW]."""
    return t.permute(0, 4, 1, 2, 3)


def judge(desc, inp, outputs, model):
    r = kgate.judge(desc, inp, outputs, model=model)
    assert r.passed, str(r)


CONV = [  # (module, kwargs, x shape NCDHW, dtype)
    (knn.FastConv3d, dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, bias=True), (1, 8, 5, 5, 5), "fp32"),
    (knn.FastConv3d, dict(in_channels=16, out_channels=16, kernel_size=3, stride=2, padding=1, groups=2, bias=False),
     (2, 16, 6, 6, 6), "bf16"),
    (knn.FastConvTranspose3d, dict(in_channels=8, out_channels=4, kernel_size=2, stride=2, bias=True), (1, 8, 3, 3, 3),
     "fp32"),
    (knn.FastConvTranspose3d, dict(in_channels=16, out_channels=16, kernel_size=3, stride=2, padding=1,
                                   output_padding=1, bias=True), (1, 16, 4, 4, 4), "bf16"),
]


def model_for(dtype):
    # The host emulator runs bf16 / fp16 on its CDNA3 MFMA model (gfx942 target), fp32 on the portable kernels.
    return "fp32-any-order" if dtype == "fp32" else "mfma-cdna3"


@pytest.mark.parametrize("cls,kw,shape,dtype", CONV)
@pytest.mark.parametrize("fill", ["lattice", "signed"])
def test_conv_every_direction_passes_the_oracle(cls, kw, shape, dtype, fill):
    m = cls(**kw).to(TORCH_DT[dtype])
    op = "conv3d" if cls is knn.FastConv3d else "conv_transpose3d"
    pads = m.padding
    geom = ops.ConvGeometry(op, shape, m.weight.shape, m.stride, pads, pads, m.dilation, m.groups,
                            getattr(m, "output_padding", (0, 0, 0)))
    bias = m.bias is not None
    knn.report(reset=True)
    # Forward: x, w, b from kgate; y judged.
    d = geom.descriptor("fwd", dtype, bias)
    inp = kgate.inputs(d, fill=fill, seed=3)
    with torch.no_grad():
        m.weight.copy_(torch_weight(t_of(inp["w"], dtype)))
        if bias:
            m.bias.copy_(t_of(inp["b"], dtype))
    y = m(ncdhw(t_of(inp["x"], dtype)))
    assert knn.report() == {(op, "kgate"): 1}
    judge(d, inp, {"y": np_of(ops.ndhwc(y), dtype)}, model_for(dtype))
    # Input gradient: dy and w from kgate.
    d = geom.descriptor("bwd_data", dtype, False)
    inp = kgate.inputs(d, fill=fill, seed=4)
    with torch.no_grad():
        m.weight.copy_(torch_weight(t_of(inp["w"], dtype)))
    x = ncdhw(torch.zeros(shape[0], *shape[2:], shape[1], dtype=TORCH_DT[dtype])).requires_grad_(True)
    m(x).backward(ncdhw(t_of(inp["dy"], dtype)))
    judge(d, inp, {"dx": np_of(ops.ndhwc(x.grad), dtype)}, model_for(dtype))
    # Weight and bias gradients: x and dy from kgate.
    d = geom.descriptor("bwd_weight", dtype, bias)
    inp = kgate.inputs(d, fill=fill, seed=5)
    m.zero_grad(set_to_none=True)
    m(ncdhw(t_of(inp["x"], dtype))).backward(ncdhw(t_of(inp["dy"], dtype)))
    outs = {"dw": np_of(m.weight.grad.permute(0, 2, 3, 4, 1), dtype)}
    if bias:
        outs["db"] = np_of(m.bias.grad, dtype)
    judge(d, inp, outs, model_for(dtype))


@pytest.mark.parametrize("dtype,relu,affine", [("fp32", True, True), ("bf16", True, True), ("fp32", False, False)])
def test_groupnorm_forward_and_backward_pass_the_oracle(dtype, relu, affine):
    n, c, g, sp = 2, 16, 4, (3, 4, 5)
    m = knn.FastGroupNorm(g, c, affine=affine, relu=relu)
    d = ops.groupnorm_descriptor("fwd", dtype, dtype, n, c, g, sp, m.eps, affine, relu)
    inp = kgate.inputs(d, fill="signed", seed=2)
    if affine:
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(inp["gamma"].copy()))
            m.bias.copy_(torch.from_numpy(inp["beta"].copy()))
    x = ncdhw(t_of(inp["x"], dtype)).requires_grad_(True)
    knn.report(reset=True)
    y = m(x)
    assert knn.report() == {("groupnorm+relu" if relu else "groupnorm", "kgate"): 1}
    # mean and rstd are not returned by the module; y is judged (mean and
    # rstd by a direct Function call through the oracle's y bound).
    r = kgate.judge(d, inp, {"y": np_of(ops.ndhwc(y), dtype), **_stats(x, m, g, dtype)}, model="fp32-any-order")
    assert r.passed, str(r)
    # Backward on kgate's bwd inputs (x, dy, gamma, beta, mean, rstd).
    db = ops.groupnorm_descriptor("bwd", dtype, dtype, n, c, g, sp, m.eps, affine, relu)
    bi = kgate.inputs(db, fill="signed", seed=6)
    xb = ncdhw(t_of(bi["x"], dtype))
    gamma = torch.from_numpy(bi["gamma"].copy()).requires_grad_(True) if affine else None
    beta = torch.from_numpy(bi["beta"].copy()).requires_grad_(True) if affine else None
    dx, dgamma, dbeta = ops.GroupNormFunction.backward(
        _Ctx(xb, bi, gamma, beta, g, m.eps, relu, affine, dtype, sp), ncdhw(t_of(bi["dy"], dtype)))[:3]
    outs = {"dx": np_of(ops.ndhwc(dx), dtype)}
    if affine:
        outs["dgamma"], outs["dbeta"] = dgamma.numpy(), dbeta.numpy()
    r = kgate.judge(db, bi, outs, model="fp32-any-order")
    assert r.passed, str(r)


def _stats(x, m, g, dtype):
    """mean and rstd of the forward, as GroupNormFunction saves them."""
    class C:
        def save_for_backward(self, *t):
            self.saved = t
    ctx = C()
    ops.GroupNormFunction.forward(ctx, x.detach(), m.weight, m.bias, g, m.eps, m.relu, x.dtype)
    return {"mean": ctx.saved[1].numpy(), "rstd": ctx.saved[2].numpy()}


class _Ctx:
    """What GroupNormFunction.backward reads from its context, from kgate's inputs."""

    def __init__(self, x, bi, gamma, beta, g, eps, relu, affine, dtype, sp):
        self.saved_tensors = (ops._cl(x), torch.from_numpy(bi["mean"].copy()), torch.from_numpy(bi["rstd"].copy()),
                              gamma.detach() if affine else None, beta.detach() if affine else None)
        self.args = (g, eps, relu, affine, dtype, dtype, sp)


def test_the_ladder_refuses_in_order(monkeypatch):
    m = knn.FastConv3d(4, 4, 3, padding=1)
    x = torch.randn(1, 4, 4, 4, 4).contiguous(memory_format=torch.channels_last_3d)
    knn.report(reset=True)
    m.double()
    monkeypatch.setenv("KGATE_DISABLE", "1")
    m(x.double())  # disabled: the first rung, before the dtype's
    monkeypatch.delenv("KGATE_DISABLE")
    m(torch.randn(1, 4, 4, 4, 4).double())  # NCDHW-contiguous and fp64: the layout's rung comes first
    m(x.double())  # fp64: dtype
    m.float()
    m4 = knn.FastConv3d(4, 4, 3, padding=1, padding_mode="reflect")
    m4(x)
    m(x)
    r = knn.report()
    assert r[("conv3d", "torch: disabled: KGATE_DISABLE is set")] == 1
    assert r[("conv3d", "torch: layout: x is not channels_last_3d-contiguous")] == 1
    assert r[("conv3d", "torch: dtype: x is torch.float64")] == 1
    assert list(r)[:3] == [("conv3d", "torch: disabled: KGATE_DISABLE is set"),
                           ("conv3d", "torch: layout: x is not channels_last_3d-contiguous"),
                           ("conv3d", "torch: dtype: x is torch.float64")]
    assert r[("conv3d", "torch: mode: padding_mode reflect")] == 1
    assert r[("conv3d", "kgate")] == 1


def test_mixed_devices_fall_back_to_torch_which_raises():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: a CPU weight with a CUDA input is tested on the GPU")
    m = knn.FastConv3d(4, 4, 3, padding=1)
    x = torch.randn(1, 4, 4, 4, 4, device="cuda").contiguous(memory_format=torch.channels_last_3d)
    knn.report(reset=True)
    with pytest.raises(RuntimeError):
        m(x)  # torch's own error, as stock nn.Conv3d raises
    assert knn.report() == {("conv3d", "torch: device: weight is on cpu, x on cuda:0"): 1}


def test_a_kernel_decline_falls_back_with_its_reason():
    # fp16 in with a bf16 out is not a pair the kernels take; through the
    # Function's own query, the reason is the kernel's.
    ok, why, _ = ops.query("host", "conv3d.fwd fp16:bf16 n1 c4 k4 d4 kd3")
    assert not ok and why


def test_state_dict_loads_both_ways():
    for fast, stock, args in [(knn.FastConv3d, torch.nn.Conv3d, (4, 8, 3)),
                              (knn.FastConvTranspose3d, torch.nn.ConvTranspose3d, (4, 8, 2)),
                              (knn.FastGroupNorm, torch.nn.GroupNorm, (2, 8))]:
        a, b = fast(*args), stock(*args)
        b.load_state_dict(a.state_dict())
        a2 = fast(*args)
        a2.load_state_dict(b.state_dict())
        for k, v in a.state_dict().items():
            assert torch.equal(v, a2.state_dict()[k])


def test_same_inputs_same_bits():
    m = knn.FastConv3d(16, 16, 3, padding=1).bfloat16()
    x = torch.randn(1, 16, 5, 5, 5).bfloat16().contiguous(memory_format=torch.channels_last_3d).requires_grad_(True)
    outs = []
    for _ in range(2):
        m.zero_grad(set_to_none=True)
        x.grad = None
        y = m(x)
        y.float().square().sum().backward()
        outs.append((y.detach().clone(), x.grad.clone(), m.weight.grad.clone(), m.bias.grad.clone()))
    for a, b in zip(*outs):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_cuda_graphs_capture_the_calls():
    if not torch.cuda.is_available() or ops.library("cuda") is None:
        pytest.skip("no CUDA device or no libkgate_ops_cuda.so: CUDA graph capture is tested on the GPU")
    m = knn.FastConv3d(16, 16, 3, padding=1).cuda().bfloat16()
    x = torch.randn(1, 16, 8, 8, 8, device="cuda").bfloat16().contiguous(memory_format=torch.channels_last_3d)
    y0 = m(x)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        m(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = m(x)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y.view(torch.int16), y0.view(torch.int16))
