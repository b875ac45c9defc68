"""Targets of kgate's driver protocol for the tests: numpy_ref behind
kgate.driver's interface, correct and with planted defects."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kgate  # noqa: E402
import numpy_ref  # noqa: E402
from kgate.driver import Declined  # noqa: E402


def _fp64(problem, inputs):
    return {r: kgate.to_float64(a, problem["inputs"][r]["dtype"]) for r, a in inputs.items()}


def _outputs(problem, inputs):
    ref = numpy_ref.compute(problem, _fp64(problem, inputs))
    return {r: kgate.round_to(ref[r], s["dtype"]) for r, s in problem["outputs"].items()}


class Correct:
    """numpy_ref rounded once to each output's dtype."""

    def describe(self):
        return "numpy_ref (tests)"

    def run(self, problem, inputs):
        return _outputs(problem, inputs)


class DeclinesGroupNorm(Correct):
    def supports(self, problem):
        if problem["op"] == "groupnorm":
            return False, "no GroupNorm here"
        return True, ""


class Raises(Correct):
    def run(self, problem, inputs):
        raise RuntimeError("planted kernel error")


class DeclinesAtRun(Correct):
    def run(self, problem, inputs):
        raise Declined("not this shape")


class WrongShape(Correct):
    def run(self, problem, inputs):
        return {r: a[..., :-1] if a.ndim > 1 else a[:-1] for r, a in _outputs(problem, inputs).items()}


class WrongDtype(Correct):
    def run(self, problem, inputs):
        return {r: a.astype(np.float64) for r, a in _outputs(problem, inputs).items()}


class Nondeterministic(Correct):
    """A different last bit on every call: the determinism rerun catches it."""

    calls = 0

    def run(self, problem, inputs):
        Nondeterministic.calls += 1
        out = _outputs(problem, inputs)
        for r, a in out.items():
            if a.dtype == np.float32 and Nondeterministic.calls % 2 == 0:
                a.view(np.uint32).flat[0] ^= np.uint32(1)
        return out


class PrintsToStdout(Correct):
    """Prints to fd 1 from Python and below it: the driver keeps its channel clean."""

    def run(self, problem, inputs):
        print("chatter on stdout")
        os.write(1, b"raw chatter on fd 1\n")
        return _outputs(problem, inputs)


class Timed(Correct):
    """A target that times its own runs (kgate.driver's time() hook): a
    planted time per run, and a timer naming the request's timing field."""

    def time(self, problem, inputs, timing):
        for _ in range(timing["warmup"]):
            self.run(problem, inputs)
        what = f"planted timer (warmup {timing['warmup']}, iters {timing['iters']}, flush {timing['flush_bytes']})"
        return self.run(problem, inputs), [0.25] * timing["iters"], what


class TimesWrongCount(Timed):
    def time(self, problem, inputs, timing):
        out, times, what = super().time(problem, inputs, timing)
        return out, times + [0.25], what


class TimesNotNumbers(Timed):
    def time(self, problem, inputs, timing):
        out, times, what = super().time(problem, inputs, timing)
        return out, ["fast"] * len(times), what


class TimesNegative(Timed):
    def time(self, problem, inputs, timing):
        out, times, what = super().time(problem, inputs, timing)
        return out, [-1.0] * len(times), what


class TimerNotString(Timed):
    def time(self, problem, inputs, timing):
        out, times, _ = super().time(problem, inputs, timing)
        return out, times, 42


class NumpyTimes(Timed):
    """Times as NumPy float32 scalars (not JSON numbers until the driver converts them)."""

    def time(self, problem, inputs, timing):
        out, times, what = super().time(problem, inputs, timing)
        return out, np.asarray(times, np.float32), what


correct = Correct()
declines_groupnorm = DeclinesGroupNorm()
raises = Raises()
declines_at_run = DeclinesAtRun()
wrong_shape = WrongShape()
wrong_dtype = WrongDtype()
nondeterministic = Nondeterministic()
prints_to_stdout = PrintsToStdout()
timed = Timed()
times_wrong_count = TimesWrongCount()
times_not_numbers = TimesNotNumbers()
times_negative = TimesNegative()
timer_not_string = TimerNotString()
numpy_times = NumpyTimes()
