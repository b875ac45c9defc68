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


def bench(tmp_path, *args):
    """`kgate bench` with the torch arms (the same backend, timed in the
    driver): (rc, output, report)."""
    import json
    report = tmp_path / "bench.json"
    env = dict(os.environ, KGATE_PYTHON=sys.executable)
    p = subprocess.run([kgate.binary(), "bench", "--budget", "0.3", "--min-rounds", "2", "--max-rounds", "3",
                        "--backend-option", "device=cpu", "--json", str(report), *args],
                       capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, p.stdout + p.stderr, json.loads(report.read_text()) if report.exists() else None


def test_bench_torch_arms(tmp_path):
    problems = ["conv3d.bwd_weight bf16 n1 c8 k8 d5 kd3 p1 bias", "groupnorm.fwd bf16 n1 c16 g4 d6 relu",
                "groupnorm.bwd bf16 n1 c16 g4 d6 relu", "conv3d.fwd bf16:fp32 n1 c8 k8 d4 kd3"]
    rc, out, report = bench(tmp_path, *problems, "--arm", "torch", "--arm", "torch-det")
    assert rc == 0, out
    for p in report["problems"][:3]:
        torch_arm, det = p["arms"]
        for arm in (torch_arm, det):
            assert arm["check"].startswith("passed"), (p["problem"], arm)
            assert len(arm["samples_ms"]) >= 2 and all(t > 0 for t in arm["samples_ms"]), arm
            # The backend's own timer (on the CPU: the wall clock around each
            # step), with the cache flush, and the arm's options.
            assert arm["timer"].startswith(f"wall clock around each call (torch {torch.__version__} on cpu"), arm
            assert f"{report['flush_bytes']} bytes overwritten on the cpu before each" in arm["timer"], arm
            assert "channels_last_3d, autocast" in arm["timer"], arm
        assert "deterministic" in det["timer"] and "deterministic" not in torch_arm["timer"], p
    # Autocast would compute a bf16:fp32 convolution in bf16: declined, not timed.
    for arm in report["problems"][3]["arms"]:
        assert arm["not_timed"].startswith("declined by torch: autocast=1 computes the convolution in bf16"), arm
