"""pytest plugin: run your kernel's tests over kgate's corpus.

    pytest -p kgate.pytest_plugin --kgate-config A [--kgate-filter op=conv3d.fwd ...] [--kgate-full]

Any test taking a `kgate_problem` argument is parametrized over
kgate.problems(config, filters, full, flop_budget), one test per problem,
its id the descriptor. Without --kgate-config such tests are skipped, with
the reason shown by `pytest -rs`. The `kgate_check` fixture judges outputs
and fails the test with kgate's table, keeping the inputs and outputs under
the test's tmp_path and printing the commands that reproduce the verdict:

    def test_my_conv(kgate_problem, kgate_check):
        inp = kgate.inputs(kgate_problem.descriptor, fill="lattice")
        kgate_check(kgate_problem.descriptor, inp, {"y": my_conv(inp)})
"""

import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

import kgate

_NO_CONFIG = ("kgate_problem: no --kgate-config given, so no kgate problems to run "
              "(e.g. pytest -p kgate.pytest_plugin --kgate-config A --kgate-filter op=conv3d.fwd)")


def pytest_addoption(parser):
    group = parser.getgroup("kgate", "kgate problems (tests taking kgate_problem)")
    group.addoption("--kgate-config", action="append", default=None, metavar="NAME",
                    help="corpus configuration(s) to run (A B C D, plan); repeatable")
    group.addoption("--kgate-filter", action="append", default=[], metavar="KEY=VALUE",
                    help="select problems: op, dir, dtype, site, config, form (as kgate verify --filter); repeatable")
    group.addoption("--kgate-full", action="store_true", default=False,
                    help="full extents (default: reduced extents within the FLOP budget)")
    group.addoption("--kgate-flop-budget", type=float, default=None, metavar="X",
                    help="reduced extents: conv FLOPs per problem (kgate's default 3e8)")


def _selection(config):
    args = ["--kgate-config", *config.getoption("kgate_config")]
    for f in config.getoption("kgate_filter"):
        args += ["--kgate-filter", f]
    if config.getoption("kgate_full"):
        args.append("--kgate-full")
    if config.getoption("kgate_flop_budget") is not None:
        args += ["--kgate-flop-budget", repr(config.getoption("kgate_flop_budget"))]
    return shlex.join(args)


def _problems(config):
    """The selected problems, listed once per session."""
    cached = getattr(config, "_kgate_problems", None)
    if cached is None:
        try:
            cached = kgate.problems(config=config.getoption("kgate_config"),
                                    filters=config.getoption("kgate_filter"),
                                    full=config.getoption("kgate_full"),
                                    flop_budget=config.getoption("kgate_flop_budget"))
        except kgate.KgateError as e:
            raise pytest.UsageError(f"kgate problems ({_selection(config)}): {e}") from None
        config._kgate_problems = cached
    return cached


def pytest_configure(config):
    # List the problems before collection, so a bad selection (an unknown
    # configuration, a filter that selects nothing) is a usage error (exit 4)
    # naming the option, not a collection error in every test module.
    if config.getoption("kgate_config", None):
        _problems(config)


def pytest_generate_tests(metafunc):
    if "kgate_problem" not in metafunc.fixturenames:
        return
    if not metafunc.config.getoption("kgate_config"):
        metafunc.parametrize("kgate_problem", [pytest.param(None, marks=pytest.mark.skip(reason=_NO_CONFIG))],
                             ids=["no-kgate-config"])
        return
    problems = _problems(metafunc.config)
    if not problems:
        reason = f"kgate_problem: no problem matches {_selection(metafunc.config)}"
        metafunc.parametrize("kgate_problem", [pytest.param(None, marks=pytest.mark.skip(reason=reason))],
                             ids=["no-kgate-problem"])
        return
    metafunc.parametrize("kgate_problem", problems, ids=[p.descriptor for p in problems])


def check(descriptor, inputs, outputs, model="fp32-any-order", keep_dir=None):
    """kgate.judge, then pytest.fail (with the verdict's table and its repro
    lines) unless it passed; returns the JudgeResult. With `keep_dir`, a
    failure copies the inputs and writes the outputs there, so the repro
    lines name files that outlive the test."""
    result = kgate.judge(descriptor, inputs, outputs, model=model)
    if result.passed:
        return result
    repro = None
    extra = ""
    if keep_dir is not None:
        keep = Path(keep_dir)
        in_dir, out_dir = keep / "inputs", keep / "outputs"
        shutil.rmtree(keep, ignore_errors=True)
        src = inputs.dir if isinstance(inputs, kgate.Inputs) else Path(inputs)
        shutil.copytree(src, in_dir)
        out_dir.mkdir(parents=True)
        for role, a in outputs.items():
            np.save(out_dir / f"{role}.npy", np.ascontiguousarray(a), allow_pickle=False)
        repro = shlex.join([kgate.binary(), "judge", result.descriptor or descriptor, "--inputs", str(in_dir),
                            "--outputs", str(out_dir), "--model", model])
        gen = inputs.gen_command if isinstance(inputs, kgate.Inputs) else None
        if gen:
            extra = f"\n  inputs again: {gen}"
    pytest.fail(result.format(repro=repro) + extra, pytrace=False)


@pytest.fixture
def kgate_check(tmp_path):
    """check(descriptor, inputs, outputs, model="fp32-any-order") -> JudgeResult,
    failing the test unless kgate's verdict is passed; a failure keeps the
    inputs and outputs under the test's tmp_path/kgate."""
    def _check(descriptor, inputs, outputs, model="fp32-any-order"):
        return check(descriptor, inputs, outputs, model=model, keep_dir=tmp_path / "kgate")
    return _check
