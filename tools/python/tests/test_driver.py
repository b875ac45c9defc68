"""`kgate verify|check --backend python:MODULE[:ATTR]` and `kgate bench
--arm python:MODULE[:ATTR]` over kgate's driver protocol (kgate.driver):
verdicts for what the implementation computes, timings taken in the
driver's process, exit 2 naming the driver for whatever breaks the
protocol."""

import json
import os
import stat
import subprocess
import sys

import pytest

import kgate

HERE = os.path.dirname(os.path.abspath(__file__))
DESC = "conv3d.fwd bf16:fp32 n1 c4 k4 d4 kd3 p1 bias"


def run(args, python=sys.executable, timeout=120, pythonpath=()):
    env = dict(os.environ)
    env["KGATE_PYTHON"] = python
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, os.path.join(HERE, "drivers"), env.get("PYTHONPATH", "")])
    p = subprocess.run([kgate.binary()] + args, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def check(target, *extra, desc=DESC):
    return run(["check", desc, "--backend", f"python:numpy_backend:{target}", "--progress", "0", *extra])


def test_a_correct_implementation_passes_every_fill():
    rc, out = check("correct")
    assert rc == 0, out
    assert "tier1 exact        : passed" in out  # the lattice fill is exact under fp32-any-order
    assert "--backend python:numpy_backend:correct --model fp32-any-order" in out  # the repro line


@pytest.mark.parametrize("desc", ["conv_transpose3d.bwd_weight fp16:fp32 n2 c4 k2 d3 kd2 s2 bias",
                                  "groupnorm.bwd fp32 n1 c8 g4 d3", "groupnorm.fwd bf16 n1 c8 g2 d3 relu"])
def test_other_directions_pass(desc):
    rc, out = check("correct", desc=desc)
    assert rc == 0, out


def test_verify_runs_the_selection_in_one_driver():
    rc, out = run(["verify", "--backend", "python:numpy_backend:declines_groupnorm", "--config", "plan",
                   "--filter", "op=groupnorm.fwd", "--report", "", "--junit", ""])
    assert rc == 3, out  # declined: skipped, never passed
    assert "INCOMPLETE:" in out and " skipped" in out
    assert "bitwise: not run" in out


def test_a_kernel_error_is_a_failed_verdict():
    rc, out = check("raises")
    assert rc == 1, out
    assert "planted kernel error" in out


def test_a_decline_after_supports_is_a_failure():
    rc, out = check("declines_at_run")
    assert rc == 1, out
    assert "declined at run time" in out


def test_a_nondeterministic_implementation_fails():
    rc, out = check("nondeterministic", "--repeats", "2")
    assert rc == 1, out
    assert "nondeterministic" in out


def test_stray_stdout_does_not_corrupt_the_channel():
    rc, out = check("prints_to_stdout")
    assert rc == 0, out
    assert "chatter on stdout" in out  # on stderr, passed through


@pytest.mark.parametrize("target,message", [("wrong_shape", "y has dims 1x4x4x4x3, expected 1x4x4x4x4"),
                                            ("wrong_dtype", "y: .*fp32")])
def test_wrong_outputs_are_errors_of_the_run(target, message):
    import re
    rc, out = check(target)
    assert rc == 2, out
    assert f"driver python:numpy_backend:{target} on '{DESC}'" in out
    assert re.search(message, out), out
    assert "an error of the run, not a verdict on the kernel" in out


def test_a_module_that_cannot_load_is_named():
    rc, out = run(["check", DESC, "--backend", "python:no_such_module_here"])
    assert rc == 2, out
    assert "ModuleNotFoundError" in out and "driver python:no_such_module_here" in out


def fake_python(tmp_path, body):
    """An executable standing in for the interpreter: speaks `body` (sh)."""
    f = tmp_path / "fake-python"
    f.write_text("#!/bin/sh\n" + body + "\n")
    f.chmod(f.stat().st_mode | stat.S_IEXEC)
    return str(f)


def test_garbage_on_the_channel(tmp_path):
    rc, out = run(["check", DESC, "--backend", "python:x"], python=fake_python(tmp_path, "echo garbage; cat >/dev/null"))
    assert rc == 2, out
    assert "malformed protocol message" in out and "'garbage'" in out


def test_a_driver_that_dies(tmp_path):
    rc, out = run(["check", DESC, "--backend", "python:x"], python=fake_python(tmp_path, "exit 3"))
    assert rc == 2, out
    assert "no handshake: the driver exited (exit status 3)" in out


def test_a_driver_that_hangs(tmp_path):
    body = 'echo \'{"kgate_protocol": 1, "driver": "fake"}\'; exec sleep 30'
    rc, out = run(["check", DESC, "--backend", "python:x", "--driver-timeout", "1"], python=fake_python(tmp_path, body))
    assert rc == 2, out
    assert "no answer within 1 s (--driver-timeout)" in out


def test_an_answer_to_another_request(tmp_path):
    body = ('echo \'{"kgate_protocol": 1, "driver": "fake"}\'; read line; '
            'echo \'{"id": 99, "status": "ok"}\'; cat >/dev/null')
    rc, out = run(["check", DESC, "--backend", "python:x"], python=fake_python(tmp_path, body))
    assert rc == 2, out
    assert "an answer to another request (id 99, expected 1)" in out


def test_an_interpreter_that_does_not_exist():
    rc, out = run(["check", DESC, "--backend", "python:x"], python="/nonexistent/python3")
    assert rc == 2, out
    assert "KGATE_PYTHON" in out


def test_bad_flags_are_refused_before_the_driver_starts():
    rc, out = run(["check", DESC, "--backend", "python:x", "--model", "nope"])
    assert rc == 2 and "--model" in out, out
    rc, out = run(["check", DESC, "--backend", "pyth0n:x"])
    assert rc == 2 and "--backend" in out, out
    rc, out = run(["check", DESC, "--backend", "python:numpy_backend:correct", "--backend-option", "novalue"])
    assert rc == 2 and "--backend-option: expected KEY=VALUE" in out, out


# kgate bench's external arms: the same protocol, the runs timed in the
# driver's process (the run request's timing field).

def bench(arm, tmp_path, *extra, desc=DESC, python=sys.executable, pythonpath=()):
    """`kgate bench DESC --arm ARM` with a small budget: (rc, output, report or None)."""
    report = tmp_path / "bench.json"
    rc, out = run(["bench", desc, "--arm", arm, "--budget", "0.2", "--min-rounds", "2", "--max-rounds", "3",
                   "--json", str(report), *extra], python=python, pythonpath=pythonpath)
    return rc, out, json.loads(report.read_text()) if report.exists() else None


def test_bench_times_any_python_target(tmp_path):
    rc, out, report = bench("python:numpy_backend:correct", tmp_path)
    assert rc == 0, out
    (arm,) = report["problems"][0]["arms"]
    assert arm["check"].startswith("passed"), arm
    # No time() hook: kgate.driver times each run() call, after the host flush.
    assert arm["timer"].startswith("wall clock around each run() call (kgate.driver, "
                                   f"{report['flush_bytes']} host bytes overwritten before each)"), arm["timer"]
    assert len(arm["samples_ms"]) >= 2 and all(t > 0 for t in arm["samples_ms"]), arm


@pytest.mark.parametrize("target", ["timed", "numpy_times"])
def test_bench_reports_the_targets_own_times(tmp_path, target):
    rc, out, report = bench(f"python:numpy_backend:{target}", tmp_path, "--no-flush")
    assert rc == 0, out
    (arm,) = report["problems"][0]["arms"]
    assert arm["check"].startswith("passed"), arm
    assert set(arm["samples_ms"]) == {0.25}, arm  # each sample: the mean of the target's planted times
    # The timer of setup's request: three warm-up runs, one timed run, no flush (--no-flush).
    assert arm["timer"].startswith("planted timer (warmup 3, iters 1, flush 0)"), arm["timer"]


@pytest.mark.parametrize("target,message", [
    ("times_wrong_count", r"times_ms must be an array of 1 number\(s\) \(the request's iters\), got \[0\.25,0\.25\]"),
    ("times_not_numbers", r'times_ms holds "fast", not a finite non-negative number of milliseconds'),
    ("times_negative", r"times_ms holds -1\.0, not a finite non-negative number"),
    ("timer_not_string", r"timer must be a string, got 42"),
])
def test_bad_timing_replies_are_errors_of_the_run(tmp_path, target, message):
    import re
    rc, out, report = bench(f"python:numpy_backend:{target}", tmp_path)
    assert rc == 2, out
    assert f"driver python:numpy_backend:{target} on '{DESC}'" in out, out
    assert re.search(message, out), out
    assert "an error of the run, not a verdict on the kernel" in out
    assert report is None  # the run stopped: no report of timings it does not have


def test_a_driver_without_the_timing_field(tmp_path):
    """A protocol-1 driver that ignores the timing field serves check and
    verify as before; bench names it for the times it does not answer."""
    python = fake_python(tmp_path, f'exec {sys.executable} {os.path.join(HERE, "drivers", "untimed_driver.py")}')
    rc, out = run(["check", DESC, "--backend", "python:x", "--progress", "0"], python=python)
    assert rc == 0, out
    rc, out, _ = bench("python:x", tmp_path, python=python)
    assert rc == 2, out
    assert f"driver python:x on '{DESC}': a timed run answered ok without times_ms" in out, out


def test_a_bench_arm_whose_driver_cannot_start(tmp_path):
    rc, out, _ = bench("python:no_such_module_here", tmp_path)
    assert rc == 2, out
    assert "kgate: error: arm python:no_such_module_here: driver python:no_such_module_here" in out, out
    assert "ModuleNotFoundError" in out and "KGATE_PYTHON names another" in out, out


def test_the_torch_arm_without_torch(tmp_path):
    """Where the interpreter cannot import torch (hidden here by a package
    that refuses to load), the torch arm stops the run with a message."""
    hidden = tmp_path / "hide" / "torch"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError(\"No module named 'torch' (hidden by the test)\")\n")
    rc, out, _ = bench("torch", tmp_path, pythonpath=[str(tmp_path / "hide")])
    assert rc == 2, out
    assert "kgate: error: arm torch: driver torch: the driver could not start" in out, out
    assert "--backend torch needs PyTorch: No module named 'torch' (hidden by the test)" in out, out
