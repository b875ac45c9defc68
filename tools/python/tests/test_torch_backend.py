"""`kgate check --backend torch` (kgate.backends.torch) on the CPU: PyTorch's
conv3d / conv_transpose3d / autograd and ATen GroupNorm judged by the
oracle. Skipped, saying so, where the interpreter has no torch."""

import os
import subprocess
import sys

import pytest

import kgate

torch = pytest.importorskip("torch", reason=f"torch not installed for {sys.executable}: the torch backend is not tested")


def check(desc, *extra):
    env = dict(os.environ, KGATE_PYTHON=sys.executable)
    p = subprocess.run([kgate.binary(), "check", desc, "--backend", "torch", "--progress", "0",
                        "--backend-option", "device=cpu", *extra], capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("desc", [
    "conv3d.fwd fp32 n1 c4 k6 d5 kd3 p1:2 s2 bias",
    "conv3d.bwd_data fp32 n2 c4 k4 d5 kd3 p1 g2",
    "conv3d.bwd_weight fp32 n1 c4 k4 d5 kd3 dil2 p2 bias",
    "conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd3 s2 p1:0 op1 bias",
    "conv_transpose3d.bwd_data fp32 n1 c4 k2 d3 kd2 s2",
    "conv_transpose3d.bwd_weight fp32 n1 c4 k4 d3 kd2 s2 bias",
    "conv3d.fwd bf16 n1 c8 k8 d4 kd3 p1",
    "groupnorm.fwd fp32 n2 c8 g2 d3 relu",
    "groupnorm.bwd fp32 n1 c8 g4 d3 relu",
    "groupnorm.fwd bf16 n1 c8 g2 d3",
])
def test_torch_passes(desc):
    rc, out = check(desc, "--model", "fp32-any-order")
    assert rc == 0, out
    assert f"torch {torch.__version__} on cpu" in out


def test_torch_deterministic_option_and_reruns():
    rc, out = check("conv3d.bwd_weight fp32 n1 c4 k4 d5 kd3 p1", "--backend-option", "deterministic=1", "--repeats", "2")
    assert rc == 0, out
    assert "deterministic" in out


def test_an_unknown_torch_option_is_named():
    rc, out = check("conv3d.fwd fp32 n1 c4 k4 d4 kd3", "--backend-option", "warp=9")
    assert rc == 2, out
    assert "unknown option(s) warp" in out
