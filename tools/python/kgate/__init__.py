"""kgate from Python: generate a problem's inputs, run your kernel, let kgate
judge its outputs.

    import kgate
    inp = kgate.inputs("conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1 bias", fill="lattice")
    y = my_kernel(inp["x"], inp["w"], inp["b"])       # bf16 arrays are uint16 raw bits
    result = kgate.judge(inp.descriptor, inp, {"y": y})
    assert result.passed, str(result)

Every verdict comes from the kgate binary (`kgate judge`): this package only
moves arrays in and out of kgate's .npy files and reads its JSON. NumPy is
its only dependency. Tensors are kgate's: NDHWC activations, conv3d weight
[Cout][KD][KH][KW][Cin/g], conv_transpose3d weight [Cin][KD][KH][KW][Cout/g];
bf16 as uint16 raw bits (bf16_to_float32 / float32_to_bf16 convert).
"""

import copy
import functools
import json
import os
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._cli import BinaryNotFoundError, InputError, KgateError, RunError, binary
from ._cli import run as _run
from ._npy import bf16_to_float32, float32_to_bf16, numpy_dtype, round_to, to_float64

__all__ = [
    "Problem", "Inputs", "JudgeResult", "OutputVerdict", "TierVerdict",
    "KgateError", "InputError", "RunError", "BinaryNotFoundError",
    "problems", "describe", "inputs", "judge", "reference", "binary",
    "bf16_to_float32", "float32_to_bf16", "round_to", "to_float64", "numpy_dtype",
    "MODELS",
]

# The arithmetic models `judge` accepts (S: the split count).
MODELS = ("fp32-any-order", "fp32-split:S", "tf32", "bf16-partials:S", "mma-sm90", "mfma-cdna3")


def _json(proc, what):
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise RunError(f"kgate {what}: output is not JSON ({e})", proc.args, proc.returncode,
                       proc.stderr) from None


# --------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class Problem:
    """One problem of the corpus (`kgate problems --json`)."""
    descriptor: str
    config: str
    op: str
    form: str
    sites: tuple
    calls_per_step: int
    # Where the problem comes from (the corpus entries it stands for), as
    # kgate lists them; not part of the problem's identity.
    sources: tuple = field(default=(), compare=False, hash=False, repr=False)

    def __str__(self):
        return self.descriptor


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def problems(config="A", filters=(), full=False, flop_budget=None):
    """The corpus problems of configuration(s) `config` (a name or a list of
    names) selected by `filters` ("KEY=VALUE" strings, or a mapping KEY ->
    VALUE; keys as `kgate verify --filter`: op, dir, dtype, site, config,
    form), at reduced extents unless `full`, within `flop_budget` conv FLOPs.
    config=None: kgate's default, every configuration. A selection that
    matches nothing is an InputError (kgate refuses it, naming --filter)."""
    args = ["problems"]
    for c in _as_list(config):
        args += ["--config", c]
    if isinstance(filters, Mapping):
        filters = [f"{k}={v}" for k, v in filters.items()]
    for f in _as_list(filters):
        args += ["--filter", f]
    if full:
        args.append("--full")
    if flop_budget is not None:
        args += ["--flop-budget", repr(float(flop_budget))]
    args.append("--json")
    rows = _json(_run(args), "problems")
    if not isinstance(rows, list):
        raise RunError("kgate problems --json: expected a JSON array", [binary(), *args])
    out = []
    for r in rows:
        try:
            out.append(Problem(descriptor=r["descriptor"], config=r.get("config", ""),
                               op=r.get("op", ""), form=r.get("form", ""),
                               sites=tuple(r.get("sites", ())),
                               calls_per_step=r.get("calls_per_step", 1),
                               sources=tuple(r.get("sources", ()))))
        except (KeyError, TypeError) as e:
            raise RunError(f"kgate problems --json: malformed entry {r!r} ({e})", [binary(), *args]) from None
    return out


# --------------------------------------------------------------------------- describe

@functools.lru_cache(maxsize=256)
def _describe_cached(kgate_bin, descriptor):
    return _json(_run(["desc", descriptor, "--tensors"]), "desc")


def _describe(descriptor):
    # Keyed by the binary too: KGATE_BIN may name another build later.
    return _describe_cached(binary(), descriptor)


def describe(descriptor):
    """`kgate desc DESCRIPTOR --tensors`: {"descriptor" (canonical), "problem",
    "inputs": [{"role", "dtype", "dims", "derived"}], "outputs": [{"role",
    "dtype", "dims"}]}. Raises InputError naming the token on a bad descriptor."""
    return copy.deepcopy(_describe(descriptor))


# --------------------------------------------------------------------------- inputs

class Inputs(Mapping):
    """A problem's inputs as kgate generated them: role -> read-only ndarray
    in kgate's layout and file dtype (bf16: uint16 raw bits). The files and
    manifest.json stay in `.dir`, a private temporary folder that lives as
    long as this object (or until close()); `judge` reads them from there,
    so the arrays are read-only: what is judged is what is on disk."""

    def __init__(self, descriptor, manifest, directory, arrays, tmp=None, gen_args=None):
        self.descriptor = descriptor
        self.manifest = manifest
        self.dir = Path(directory)
        self._arrays = arrays
        self._tmp = tmp
        self._gen_args = gen_args

    @property
    def gen_command(self):
        """The `kgate gen` command line that writes these inputs again (bit
        for bit), or None for a folder loaded from elsewhere."""
        if self._gen_args is None:
            return None
        return shlex.join(["kgate", "gen", *self._gen_args, "--out", "DIR"])

    @classmethod
    def load(cls, directory, tmp=None, gen_args=None):
        """Inputs from a folder `kgate gen` wrote (manifest.json + <role>.npy)."""
        directory = Path(directory)
        try:
            manifest = json.loads((directory / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise InputError("manifest.json", f"cannot read {directory / 'manifest.json'}: {e}") from None
        arrays = {}
        for role, t in manifest.get("tensors", {}).items():
            path = directory / t["file"]
            try:
                a = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise InputError(str(path), f"cannot read input {role}: {e}") from None
            want = numpy_dtype(t["dtype"])
            if a.dtype != want or list(a.shape) != list(t["dims"]):
                raise InputError(str(path), f"{a.dtype.str} {list(a.shape)} disagrees with manifest.json "
                                            f"({t['dtype']} {t['dims']})")
            a.setflags(write=False)
            arrays[role] = a
        return cls(manifest.get("descriptor", ""), manifest, directory, arrays, tmp, gen_args)

    @property
    def fill(self):
        """The fill's parameters, as the manifest records them (kind, seed, ...)."""
        return self.manifest.get("fill", {})

    @property
    def derived(self):
        """Roles the generator derived from other inputs (e.g. statistics)."""
        return frozenset(r for r, t in self.manifest.get("tensors", {}).items() if t.get("derived"))

    def __getitem__(self, role):
        return self._arrays[role]

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self):
        return len(self._arrays)

    def close(self):
        """Removes the temporary folder (when this object made it)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        roles = ", ".join(f"{r}: {a.dtype} {'x'.join(map(str, a.shape))}" for r, a in self._arrays.items())
        return f"<kgate.Inputs {self.descriptor!r} fill={self.fill.get('kind')} seed={self.fill.get('seed')} {{{roles}}}>"


def inputs(descriptor, fill="signed", seed=1):
    """`kgate gen DESCRIPTOR --fill FILL --seed SEED` into a private temporary
    folder; returns its Inputs. Fills: signed[:scale=S], positive[:scale=S],
    uniform:lo=A,hi=B, lattice[:density=P] (exact: conv tier 1),
    gn_exact[:mean=M,constant=1], gn_sweep:mean=M,sigma=S."""
    tmp = tempfile.TemporaryDirectory(prefix="kgate-inputs-")
    try:
        gen_args = [descriptor, "--fill", fill, "--seed", str(int(seed))]
        _run(["gen", *gen_args, "--out", tmp.name])
        return Inputs.load(tmp.name, tmp, gen_args)
    except BaseException:
        tmp.cleanup()
        raise


def reference(descriptor, inputs, impl="fast"):
    """`kgate ref`: the fp64 reference outputs (role -> float64 ndarray) of
    `inputs` (an Inputs, or a folder kgate gen wrote); impl: direct, fast,
    mpfr, dot2."""
    in_dir = inputs.dir if isinstance(inputs, Inputs) else Path(inputs)
    with tempfile.TemporaryDirectory(prefix="kgate-ref-") as out:
        _run(["ref", descriptor, "--inputs", in_dir, "--impl", impl, "--out", out])
        return {p.stem: np.load(p, allow_pickle=False) for p in sorted(Path(out).glob("*.npy"))}


# --------------------------------------------------------------------------- judge

# JSON has no Inf or NaN: kgate writes them as strings.
_FLOAT_KEYS = ("reference", "candidate", "bound", "margin")
_SPECIAL = {"inf": float("inf"), "+inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _num(v):
    if isinstance(v, str):
        return _SPECIAL.get(v.strip().lower(), v)
    return v


def _state(s):
    """A tier's state as this package spells it: kgate's "n/a" is "not_applicable"."""
    if s is None:
        return "missing"
    return "not_applicable" if s == "n/a" else s


@dataclass(frozen=True)
class TierVerdict:
    """One tier of one output: state passed | failed | not_applicable (the
    reason says why), the elements checked and excluded, the violations, the
    largest margin (error / bound; > 1 violates) and the worst elements
    (dicts: index, coord, reference, candidate, bound, margin; Inf and NaN as
    floats)."""
    state: str
    reason: str
    checked: int
    excluded: int
    violations: int
    max_margin: float
    worst: tuple  # of dicts: index, coord, reference, candidate, bound, margin

    @classmethod
    def from_report(cls, r):
        r = r or {}
        worst = tuple({k: (_num(v) if k in _FLOAT_KEYS else v) for k, v in w.items()}
                      for w in (r.get("worst") or ()))
        return cls(state=_state(r.get("state")), reason=r.get("reason", ""),
                   checked=r.get("checked", 0), excluded=r.get("excluded", 0),
                   violations=r.get("violations", 0), max_margin=_num(r.get("max_margin")),
                   worst=worst)


TIERS = ("tier1", "tier2", "tier3")


@dataclass(frozen=True)
class OutputVerdict:
    """The verdict on one output tensor (the report's outputs[role])."""
    role: str
    state: str
    tier1: TierVerdict
    tier2: TierVerdict
    tier3: TierVerdict
    trust: dict
    nan_inf: dict
    report: dict

    @property
    def tiers(self):
        return {t: getattr(self, t) for t in TIERS}

    @property
    def failed_tiers(self):
        """Names of the tiers that failed, in order (e.g. ("tier1", "tier2"))."""
        return tuple(t for t in TIERS if getattr(self, t).state == "failed")

    @property
    def worst(self):
        """The worst element over the tiers (largest margin), or None."""
        cands = [w for t in TIERS for w in getattr(self, t).worst
                 if isinstance(w.get("margin"), (int, float)) and w["margin"] == w["margin"]]
        return max(cands, key=lambda w: w["margin"], default=None)


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class JudgeResult:
    """The verdict of `kgate judge`. state: passed | failed | untrusted;
    passed: state == "passed"; outputs: role -> OutputVerdict; report: the
    whole JSON report; repro: the command line that reproduces it."""

    def __init__(self, report, returncode):
        self.report = report
        self.returncode = returncode
        self.state = report.get("state", "missing")
        self.passed = self.state == "passed"
        self.reason = report.get("reason", "")
        self.descriptor = report.get("descriptor", "")
        self.model = report.get("model", "")
        self.repro = report.get("repro", "")
        self.outputs = {}
        for role, r in (report.get("outputs") or {}).items():
            self.outputs[role] = OutputVerdict(
                role=role, state=r.get("state", "missing"),
                tier1=TierVerdict.from_report(r.get("tier1")),
                tier2=TierVerdict.from_report(r.get("tier2")),
                tier3=TierVerdict.from_report(r.get("tier3")),
                trust=r.get("trust") or {}, nan_inf=r.get("nan_inf") or {}, report=r)

    def __bool__(self):
        return self.passed

    def __str__(self):
        return self.format()

    def format(self, repro=None):
        """The verdict as a short table: one row per output (its state, each
        tier's, trust, NaN/Inf, the worst element), the failing tiers'
        reasons, and the repro line (`repro` replaces kgate's, e.g. one
        naming kept copies of the temporary folders)."""
        head = f"kgate judge: {self.state} -- {self.descriptor} (model {self.model})"
        if self.reason:
            head += f"\n  {self.reason}"
        rows = [("output", "state", "tier1", "tier2", "tier3", "trust", "nan_inf", "worst margin", "at")]
        for role, o in self.outputs.items():
            w = o.worst
            at = "-"
            if w is not None:
                coord = w.get("coord", w.get("index"))
                at = ",".join(map(str, coord)) if isinstance(coord, (list, tuple)) else str(coord)
                at += f" ref {_fmt(w.get('reference'))} got {_fmt(w.get('candidate'))}"
            rows.append((role, o.state, o.tier1.state, o.tier2.state, o.tier3.state,
                         o.trust.get("state", "-"), o.nan_inf.get("state", "-"),
                         _fmt(w.get("margin")) if w else "-", at))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        lines = [head]
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(wd) for c, wd in zip(r, widths)) + "  " + r[-1])
        for role, o in self.outputs.items():
            for t in o.failed_tiers:
                tv = o.tiers[t]
                lines.append(f"  {role} {t}: " + (tv.reason or f"{tv.violations} of {tv.checked} violate"))
            if o.trust.get("state") not in (None, "passed", "trusted") and o.trust.get("reason"):
                lines.append(f"  {role} trust: {o.trust['reason']}")
        repro = self.repro if repro is None else repro
        if repro:
            lines.append(f"  repro: {repro}")
        return "\n".join(lines)

    def __repr__(self):
        return f"<kgate.JudgeResult {self.state} {self.descriptor!r} model={self.model!r}>"


def _check_outputs(spec, outputs):
    """Validates `outputs` against the descriptor's output spec; returns the
    arrays to write (C-contiguous), keyed by role. InputError names the role."""
    desc = spec.get("descriptor", "")
    if not isinstance(outputs, Mapping):
        raise InputError("outputs", f"expected a mapping role -> numpy.ndarray, got {type(outputs).__name__}")
    want = {o["role"]: o for o in spec["outputs"]}
    listing = ", ".join(f"{r} ({o['dtype']} {'x'.join(map(str, o['dims']))})" for r, o in want.items())
    for role in outputs:
        if role not in want:
            raise InputError(str(role), f"not an output of '{desc}' (its outputs: {listing})")
    arrays = {}
    for role, o in want.items():
        if role not in outputs:
            raise InputError(role, f"missing: '{desc}' has outputs {listing}")
        a = outputs[role]
        if not isinstance(a, np.ndarray):
            hint = " (torch: t.detach().cpu().numpy(); bf16: t.view(torch.int16).numpy().view(numpy.uint16))" \
                if type(a).__module__.startswith("torch") else ""
            raise InputError(role, f"expected a numpy.ndarray, got {type(a).__module__}.{type(a).__name__}{hint}")
        dt = numpy_dtype(o["dtype"])
        if a.dtype != dt:
            hint = " (bf16 is stored as raw bits: use kgate.float32_to_bf16)" if o["dtype"] == "bf16" else ""
            raise InputError(role, f"dtype {a.dtype.str} ({a.dtype}), expected {dt.str} ({dt}) for {o['dtype']}{hint}")
        if list(a.shape) != list(o["dims"]):
            raise InputError(role, f"shape {list(a.shape)}, expected {list(o['dims'])} "
                                   f"(kgate's layout: activations N,D,H,W,C)")
        arrays[role] = np.ascontiguousarray(a)
    return arrays


def judge(descriptor, inputs, outputs, model="fp32-any-order", junit=None, timeout=None):
    """`kgate judge`: judges your kernel's `outputs` (role -> ndarray, in the
    output dtype exactly: float32 for fp32, float16, uint16 raw bits for bf16;
    kgate's layout and shape) on `inputs` (an Inputs from kgate.inputs, or a
    folder kgate gen wrote) under arithmetic `model` (see MODELS).

    Raises InputError naming the tensor when an output is missing, extra, or
    of the wrong dtype or shape (before kgate runs), and with kgate's message
    when kgate refuses the input (exit 2: e.g. an input file that changed
    since gen). Any other unexpected exit raises RunError. `junit`: also
    write a JUnit XML file there."""
    spec = _describe(descriptor)
    arrays = _check_outputs(spec, outputs)
    in_dir = inputs.dir if isinstance(inputs, Inputs) else Path(inputs)
    with tempfile.TemporaryDirectory(prefix="kgate-judge-") as tmp:
        out_dir = Path(tmp) / "outputs"
        out_dir.mkdir()
        for role, a in arrays.items():
            np.save(out_dir / f"{role}.npy", a, allow_pickle=False)
        report_path = Path(tmp) / "report.json"
        args = ["judge", descriptor, "--inputs", in_dir, "--outputs", out_dir, "--model", model,
                "--report", report_path]
        if junit is not None:
            args += ["--junit", os.fspath(junit)]
        proc = _run(args, ok=(0, 1), timeout=timeout)
        try:
            report = json.loads(report_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RunError(f"kgate judge: no readable report ({e})", proc.args, proc.returncode,
                           proc.stderr) from None
    result = JudgeResult(report, proc.returncode)
    if (proc.returncode == 0) != result.passed:
        raise RunError(f"kgate judge: exit status {proc.returncode} disagrees with the report's "
                       f"state {result.state!r}", proc.args, proc.returncode, proc.stderr)
    return result
