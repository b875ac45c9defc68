"""The package's contract: problems, describe, inputs, judge's refusals, the
binary lookup, and the bf16 conversions (exact bit patterns)."""

import dataclasses
import gc
import os
import stat

import numpy as np
import pytest

import kgate
import numpy_ref

CONV = "conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1 bias"


@pytest.fixture(scope="module")
def conv_inputs():
    return kgate.inputs(CONV, fill="lattice")


# --------------------------------------------------------------------------- problems, describe, inputs

def test_problems_filtered():
    probs = kgate.problems("A", filters=["op=groupnorm.fwd"])
    assert probs, "configuration A has GroupNorm forward problems"
    assert all(isinstance(p, kgate.Problem) and p.op == "groupnorm.fwd" and p.config == "A" for p in probs)
    assert all(p.descriptor.startswith("groupnorm.fwd ") for p in probs)
    assert len({p.descriptor for p in probs}) == len(probs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        probs[0].descriptor = "x"
    assert kgate.problems("A", filters={"op": "groupnorm.fwd"}) == probs


def test_problems_bad_config_is_input_error():
    with pytest.raises(kgate.InputError) as e:
        kgate.problems("no-such-config")
    assert e.value.field == "--config" and "no-such-config" in e.value.message


def test_describe():
    d = kgate.describe(CONV)
    assert [o["role"] for o in d["outputs"]] == ["y"]
    assert d["outputs"][0]["dtype"] == "fp32" and d["outputs"][0]["dims"] == [1, 5, 5, 5, 4]
    assert {i["role"]: i["dtype"] for i in d["inputs"]} == {"x": "bf16", "w": "bf16", "b": "bf16"}
    d["outputs"].clear()  # a copy: the cache is not changed
    assert kgate.describe(CONV)["outputs"]


def test_describe_bad_descriptor_names_the_token():
    with pytest.raises(kgate.InputError) as e:
        kgate.describe("conv3d.fwd bf16 n1 c4 k4 d5 kd3 bogus")
    assert e.value.field == "descriptor" and "bogus" in e.value.message


def test_inputs(conv_inputs):
    inp = conv_inputs
    assert set(inp) == {"x", "w", "b"} and len(inp) == 3
    assert inp.descriptor == CONV and inp.fill["kind"] == "lattice" and inp.fill["seed"] == 1
    for role, a in inp.items():
        t = inp.manifest["tensors"][role]
        assert a.dtype == np.uint16 and list(a.shape) == t["dims"]  # bf16: raw bits
        assert not a.flags.writeable
        assert (inp.dir / t["file"]).is_file()
    assert "kgate gen" in inp.gen_command and "--fill lattice" in inp.gen_command


def test_inputs_folder_lives_with_the_object():
    inp = kgate.inputs("groupnorm.fwd fp32 n1 c4 g2 d2")
    d = inp.dir
    assert (d / "manifest.json").is_file()
    del inp
    gc.collect()
    assert not d.exists()
    with kgate.inputs("groupnorm.fwd fp32 n1 c4 g2 d2") as inp:
        d = inp.dir
    assert not d.exists()


def test_inputs_same_seed_same_bits():
    a = kgate.inputs(CONV, fill="signed", seed=9)
    b = kgate.inputs(CONV, fill="signed", seed=9)
    c = kgate.inputs(CONV, fill="signed", seed=10)
    assert all(np.array_equal(a[r], b[r]) for r in a)
    assert not np.array_equal(a["x"], c["x"])


def test_inputs_bad_fill_is_input_error():
    with pytest.raises(kgate.InputError) as e:
        kgate.inputs(CONV, fill="no-such-fill")
    assert e.value.field == "fill"


# --------------------------------------------------------------------------- judge refusals

def _good(inp):
    return numpy_ref.outputs(inp)


def test_judge_passes_and_reports(conv_inputs):
    result = kgate.judge(CONV, conv_inputs, _good(conv_inputs))
    assert result.passed and bool(result) and result.state == "passed"
    assert result.model == "fp32-any-order" and result.report["kgate_judge"] == 1
    assert result.outputs["y"].tier1.state == "passed" and result.outputs["y"].failed_tiers == ()
    assert "kgate judge" in result.repro
    text = str(result)
    assert "tier1" in text and "passed" in text and "repro:" in text


def test_judge_wrong_dtype_names_the_role(conv_inputs):
    out = {"y": _good(conv_inputs)["y"].astype(np.float64)}
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, out)
    assert e.value.field == "y" and "float32" in e.value.message


def test_judge_bf16_output_must_be_raw_bits():
    d = "conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1"
    inp = kgate.inputs(d, fill="lattice")
    y = kgate.bf16_to_float32(_good(inp)["y"])  # float32, not the uint16 bits
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(d, inp, {"y": y})
    assert e.value.field == "y" and "uint16" in e.value.message and "float32_to_bf16" in e.value.message


def test_judge_wrong_shape_names_the_role(conv_inputs):
    y = _good(conv_inputs)["y"]
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, {"y": y.reshape(1, 5, 5, 4, 5)})
    assert e.value.field == "y" and "[1, 5, 5, 4, 5]" in e.value.message
    with pytest.raises(kgate.InputError) as e:  # NCDHW instead of NDHWC
        kgate.judge(CONV, conv_inputs, {"y": np.ascontiguousarray(y.transpose(0, 4, 1, 2, 3))})
    assert e.value.field == "y"


def test_judge_missing_role(conv_inputs):
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, {})
    assert e.value.field == "y" and "missing" in e.value.message


def test_judge_extra_role(conv_inputs):
    out = dict(_good(conv_inputs), dx=np.zeros((1, 5, 5, 5, 4), np.float32))
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, out)
    assert e.value.field == "dx" and "not an output" in e.value.message


def test_judge_not_an_array(conv_inputs):
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, {"y": _good(conv_inputs)["y"].tolist()})
    assert e.value.field == "y" and "numpy.ndarray" in e.value.message


def test_judge_non_contiguous_output_is_written_in_c_order(conv_inputs):
    y = _good(conv_inputs)["y"]
    view = np.asfortranarray(y)  # same values, Fortran memory order
    assert not view.flags.c_contiguous
    assert kgate.judge(CONV, conv_inputs, {"y": view}).passed


def test_judge_changed_input_file_names_it():
    inp = kgate.inputs(CONV, fill="lattice")
    out = _good(inp)
    x = np.load(inp.dir / "x.npy")
    x[0, 0, 0, 0, 0] ^= 1  # one bit of one element
    np.save(inp.dir / "x.npy", x)
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, inp, out)
    assert "x.npy" in str(e.value)


def test_judge_inputs_of_another_problem():
    inp = kgate.inputs(CONV, fill="lattice")
    other = "conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1"  # no bias
    y = np.zeros((1, 5, 5, 5, 4), np.float32)
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(other, inp, {"y": y})
    assert e.value.field == "--inputs"


def test_judge_unknown_model(conv_inputs):
    with pytest.raises(kgate.InputError) as e:
        kgate.judge(CONV, conv_inputs, _good(conv_inputs), model="fp128-dreams")
    assert e.value.field == "--model" and "fp128-dreams" in e.value.message


# --------------------------------------------------------------------------- the binary

def test_kgate_bin_not_executable_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("KGATE_BIN", str(tmp_path / "nope"))
    with pytest.raises(kgate.BinaryNotFoundError) as e:
        kgate.binary()
    assert "KGATE_BIN" in str(e.value)


def test_unexpected_exit_is_run_error(monkeypatch, tmp_path):
    fake = tmp_path / "kgate"
    fake.write_text("#!/bin/sh\necho 'something broke' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KGATE_BIN", str(fake))
    with pytest.raises(kgate.RunError) as e:
        kgate.inputs(CONV)
    assert e.value.returncode == 3 and "something broke" in str(e.value)


def test_binary_found():
    path = kgate.binary()
    assert os.access(path, os.X_OK)


# --------------------------------------------------------------------------- bf16

def test_bf16_round_trips_every_pattern():
    bits = np.arange(1 << 16, dtype=np.uint16)
    f = kgate.bf16_to_float32(bits)
    back = kgate.float32_to_bf16(f)
    nan = np.isnan(f)
    assert np.array_equal(back[~nan], bits[~nan])
    assert np.isnan(kgate.bf16_to_float32(back[nan])).all()
    with np.errstate(invalid="ignore"):  # widening a signalling NaN raises "invalid"
        f64 = f.astype(np.float64)
    assert np.array_equal(kgate.float32_to_bf16(f64)[~nan], bits[~nan])


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x3F80), (-2.0, 0xC000), (0.0, 0x0000), (-0.0, 0x8000),
    (1 + 2 ** -8, 0x3F80),              # tie: to even (down)
    (1 + 3 * 2 ** -8, 0x3F82),          # tie: to even (up)
    (1 + 2 ** -8 + 2 ** -20, 0x3F81),   # above the tie
    (3.4028234663852886e38, 0x7F80),    # FLT_MAX rounds to +Inf
    (3.3895313892515355e38, 0x7F7F),    # bf16's largest finite
    (float("inf"), 0x7F80), (float("-inf"), 0xFF80),
    (2.0 ** -133, 0x0001),              # smallest subnormal
    (1.5 * 2 ** -133, 0x0002),          # subnormal tie: to even
])
def test_float32_to_bf16_bits(value, bits):
    assert int(kgate.float32_to_bf16(np.float32(value))) == bits
    assert int(kgate.float32_to_bf16(np.float64(value))) == bits


def test_float64_to_bf16_rounds_once():
    # 1 + 2^-8 + 2^-40: through fp32 it would first round to the tie 1 + 2^-8
    # and then to even (0x3F80); rounded once it is above the tie (0x3F81).
    assert int(kgate.float32_to_bf16(np.float64(1 + 2 ** -8 + 2 ** -40))) == 0x3F81
    assert int(kgate.float32_to_bf16(np.float64(-(1 + 2 ** -8 + 2 ** -40)))) == 0xBF81
    assert int(kgate.float32_to_bf16(np.float64(1e300))) == 0x7F80
    assert int(kgate.float32_to_bf16(np.float64(-1e-300))) == 0x8000


def test_nan_stays_nan():
    for v in (np.float32("nan"), -np.float32("nan"), np.float64("nan")):
        b = kgate.float32_to_bf16(v)
        assert np.isnan(kgate.bf16_to_float32(b))
    signalling = np.array([0x7F800001], dtype=np.uint32).view(np.float32)  # payload in the low bits only
    assert np.isnan(kgate.bf16_to_float32(kgate.float32_to_bf16(signalling))).all()


def test_bf16_to_float32_refuses_floats():
    with pytest.raises(TypeError):
        kgate.bf16_to_float32(np.zeros(3, np.float32))
