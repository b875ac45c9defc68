"""Wrong kernels kgate must fail, each at the tier that exists to catch it.
Each control first shows the same inputs pass with the right answer, so the
failure is the defect's, not the setup's."""

import numpy as np
import pytest

import kgate
import numpy_ref


def _judge_correct_then(inp, model="fp32-any-order", **defects):
    right = kgate.judge(inp.descriptor, inp, numpy_ref.outputs(inp), model=model)
    assert right.passed, str(right)
    return kgate.judge(inp.descriptor, inp, numpy_ref.outputs(inp, **defects), model=model)


@pytest.mark.parametrize("descriptor", [
    "conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1",
    "conv3d.fwd bf16 n1 c4 k6 g2 d6 h4 w5 kd3 s2 p1 bias",
    "conv3d.bwd_data bf16:fp32 n1 c4 k4 d5 kd3 p1",
    "conv3d.bwd_weight bf16:fp32 n1 c4 k4 d5 kd3 p1",
    "conv_transpose3d.fwd bf16:fp32 n1 c4 k4 d4 kd3 s2 p1",
])
def test_halo_off_by_one_fails_tier1(descriptor):
    # The padding read one plane off along D: same output extent, every
    # window shifted (pad front 0 / back 2 for 1 / 1).
    inp = kgate.inputs(descriptor, fill="lattice")
    result = _judge_correct_then(inp, pad_shift=1)
    assert result.state == "failed", str(result)
    for role, o in result.outputs.items():
        assert o.tier1.state == "failed", f"{role}\n{result}"
        assert o.tier1.violations > 0


@pytest.mark.parametrize("descriptor", [
    "conv3d.fwd bf16:fp32 n1 c4 k4 g2 d5 kd3 p1",
    "conv3d.bwd_data bf16 n1 c6 k4 g2 d4 kd3 p1",
    "conv_transpose3d.fwd bf16:fp32 n1 c4 k6 g2 d3 kd3 s2",
])
def test_group_computed_with_group0_weights_fails_tier1(descriptor):
    inp = kgate.inputs(descriptor, fill="lattice")
    result = _judge_correct_then(inp, group_weights_from=0)
    assert result.state == "failed", str(result)
    role, = result.outputs
    assert result.outputs[role].tier1.state == "failed", str(result)
    # Only the second group's channels are wrong.
    channels = int(kgate.describe(descriptor)["outputs"][0]["dims"][-1])
    assert all(w["coord"][-1] >= channels // 2 for w in result.outputs[role].tier1.worst), str(result)


def test_dropped_group_fails_tier1():
    # The second group's outputs left zero: tier 1 fails (and trust flags the zeros).
    inp = kgate.inputs("conv3d.fwd bf16:fp32 n1 c4 k4 g2 d5 kd3 p1", fill="lattice")
    result = _judge_correct_then(inp, drop_group=1)
    assert result.state == "failed", str(result)
    assert result.outputs["y"].tier1.state == "failed", str(result)
    assert result.outputs["y"].trust["state"] == "untrusted", str(result)


def _truncating_bf16_store(a, dtype):
    """An fp32 accumulator stored to bf16 by dropping its low 16 bits
    (round toward zero) instead of rounding to nearest even."""
    assert dtype == "bf16"
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("descriptor", [
    "conv3d.fwd bf16 n1 c8 k8 d4 kd3 p1",
    "conv3d.bwd_data bf16 n1 c8 k8 d4 kd3 p1",
])
def test_truncating_bf16_store_fails_tier2(descriptor):
    inp = kgate.inputs(descriptor, fill="signed")
    right = kgate.judge(descriptor, inp, numpy_ref.outputs(inp))
    assert right.passed, str(right)
    result = kgate.judge(descriptor, inp, numpy_ref.outputs(inp, round_store=_truncating_bf16_store))
    assert result.state == "failed", str(result)
    role, = result.outputs
    o = result.outputs[role]
    assert o.tier1.state == "not_applicable", str(result)  # a random fill is not exact
    assert o.tier2.state == "failed", str(result)


# K = 64 * 27 = 1728, cut into 8 slices of 216: each bf16 partial adds an
# error of up to 2^-9 of its size, far above fp32 accumulation's.
SPLIT_K = "conv3d.fwd bf16:fp32 n1 c64 k8 d6 kd3 p1"


@pytest.fixture(scope="module")
def split_k():
    inp = kgate.inputs(SPLIT_K, fill="signed")
    y = numpy_ref.conv3d_fwd_split_partials(inp.manifest["problem"], numpy_ref.fp64_inputs(inp), splits=8)
    return inp, y


def test_bf16_partials_fail_fp32_any_order_at_tier2(split_k):
    inp, y = split_k
    result = kgate.judge(SPLIT_K, inp, y, model="fp32-any-order")
    assert result.state == "failed", str(result)
    assert result.outputs["y"].tier2.state == "failed", str(result)


def test_bf16_partials_pass_their_own_model(split_k):
    inp, y = split_k
    result = kgate.judge(SPLIT_K, inp, y, model="bf16-partials:8")
    assert result.passed, str(result)
    assert result.model == "bf16-partials:8"
    assert result.outputs["y"].tier2.state == "passed"


def test_fp32_partials_pass_fp32_any_order(split_k):
    # The same split with fp32 partials is an fp32 kernel in another order.
    inp, _ = split_k
    y = numpy_ref.conv3d_fwd_split_partials(inp.manifest["problem"], numpy_ref.fp64_inputs(inp),
                                            splits=8, partial_dtype="fp32")
    result = kgate.judge(SPLIT_K, inp, y, model="fp32-any-order")
    assert result.passed, str(result)
