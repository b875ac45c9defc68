"""kgate's driver protocol, version 1: the Python end of
`kgate verify --backend python:MODULE[:ATTR]` (and `--backend torch`).

kgate starts `python3 -m kgate.driver --protocol 1 --target MODULE[:ATTR]
[--option KEY=VALUE ...]` once per run and talks to it over its standard
input and output, one JSON object per line:

  driver -> kgate (first line, the handshake)
      {"kgate_protocol": 1, "driver": "kgate.driver", "target": ...,
       "implementation": "<what the target says it is>"}
      or {"kgate_protocol": 1, "error": "<why the target cannot load>"}
  kgate -> driver
      {"id": N, "op": "supports", "descriptor": D, "problem": {...}}
      {"id": N, "op": "run", "descriptor": D, "problem": {...}, "rerun": K,
       "inputs":  {role: {"file": F, "dtype": T, "dims": [...]}},
       "outputs": {role: {"file": F, "dtype": T, "dims": [...]}},
       "timing":  {"warmup": W, "iters": I, "flush_bytes": B}}      (timing: optional)
      {"op": "exit"}
  driver -> kgate (one answer per request, same id)
      {"id": N, "status": "ok"}                       (run: every output file written)
      {"id": N, "status": "ok", "times_ms": [t1, ..., tI], "timer": S}
                                                      (a run with timing: I times)
      {"id": N, "status": "declined", "reason": R}    (skipped, as is_supported)
      {"id": N, "status": "error", "message": M}      (the kernel failed: a verdict)

Tensors travel as .npy files (NDHWC, kgate's dtypes; bf16 as raw uint16
bits), never as JSON numbers. The target is MODULE's attribute ATTR (the
module itself without one) with:
    run(problem: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]
    supports(problem: dict) -> (bool, str)        optional; default: (True, "")
    configure(options: dict[str, str]) -> None    optional; the --option pairs
    describe() -> str                             optional; for the handshake
    time(problem, inputs, timing: dict) -> (outputs, times_ms: list[float], timer: str)
                                                  optional; a run with timing
`problem` is the descriptor's JSON (`kgate desc D --json`) plus "descriptor",
"op_dir" ("conv3d.fwd", ...) and, for run, "inputs" and "outputs": role ->
{"dtype", "dims"}. run raises kgate.driver.Declined(reason) to
decline; any other exception is the kernel's error. The outputs must have the
requested dtype (float32, float16, uint16 for bf16) and dims: anything else
is an error of the run, which kgate reports naming the driver.

A run with "timing" (kgate bench) runs the problem W + I times, each timed
on its own after a buffer of B bytes on the implementation's device is
overwritten (B = 0: no flush), and answers the last I times in milliseconds
(the first W are warm-up), with what timed them; the output files are the
last run's. A target with time() does all of that itself (the times then
cover its computation alone, on operands already on its device); for any
other target the driver times each run(problem, inputs) call on the wall
clock, after overwriting a host buffer of B bytes. kgate checks the times
(I finite non-negative numbers): a timed run answered without them, or
with others, is an error of the run.

The protocol channel is a private copy of file descriptor 1; descriptor 1
itself (print, C extensions) goes to standard error, so stray output never
corrupts the channel.
"""

import argparse
import importlib
import json
import os
import sys
import time
import traceback


class Declined(Exception):
    """Raised by a target's run() (or returned through supports()) when it
    does not implement a problem: kgate reports the problem as skipped."""


PROTOCOL = 1

_DTYPES = {"fp64": "<f8", "fp32": "<f4", "fp16": "<f2", "bf16": "<u2"}


def _load(target):
    mod_name, _, attr = target.partition(":")
    mod = importlib.import_module(mod_name)
    return getattr(mod, attr) if attr else mod


def _answer(channel, obj):
    # default=repr: a value JSON has no type for (a target's timing answer)
    # reaches kgate as a string, which kgate names as the wrong type.
    channel.write(json.dumps(obj, default=repr) + "\n")
    channel.flush()


def _problem(req):
    p = dict(req["problem"])
    p["descriptor"] = req["descriptor"]
    p["op_dir"] = req["descriptor"].split()[0]
    for side in ("inputs", "outputs"):
        if side in req:
            p[side] = {r: {"dtype": s["dtype"], "dims": s["dims"]} for r, s in req[side].items()}
    return p


class BadRequest(Exception):
    """A request kgate should not have sent (answered "bad-request")."""


def _timing(req):
    """The request's timing field as {"warmup", "iters", "flush_bytes"} (ints;
    warmup and flush_bytes default to 0), or None for an untimed run."""
    t = req.get("timing")
    if t is None:
        return None
    try:
        warmup, iters, flush = int(t.get("warmup", 0)), int(t["iters"]), int(t.get("flush_bytes", 0))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise BadRequest(f"timing: {t!r} ({type(e).__name__}: {e})") from e
    if warmup < 0 or iters < 1 or flush < 0:
        raise BadRequest(f"timing: {t!r} (warmup >= 0, iters >= 1, flush_bytes >= 0)")
    return {"warmup": warmup, "iters": iters, "flush_bytes": flush}


def _time_run(target, problem, inputs, timing):
    """A target without time(): each run() call on the wall clock, after a
    host buffer of flush_bytes is overwritten (outside the timed call)."""
    import numpy as np

    flush = np.empty(timing["flush_bytes"], np.uint8) if timing["flush_bytes"] else None
    times = []
    for i in range(timing["warmup"] + timing["iters"]):  # the warm-up runs: timed alike, times dropped
        if flush is not None:
            flush.fill(i & 0xFF)
        t0 = time.perf_counter()
        outputs = target.run(problem, inputs)
        if i >= timing["warmup"]:
            times.append((time.perf_counter() - t0) * 1e3)
    what = "wall clock around each run() call (kgate.driver"
    what += f", {timing['flush_bytes']} host bytes overwritten before each)" if flush is not None else ")"
    return outputs, times, what


def _plain(times):
    """A target's times as JSON numbers (NumPy scalars as Python's); what is
    not a sequence of numbers is passed on for kgate to name."""
    try:
        seq = list(times)
    except TypeError:
        return times
    return [t.item() if hasattr(t, "item") and not isinstance(t, (str, bytes)) else t for t in seq]


def _run(target, req):
    """Runs the request's problem and writes its outputs; the timing answer
    fields for a timed run, else {}."""
    import numpy as np

    problem = _problem(req)
    timing = _timing(req)
    inputs = {}
    for role, spec in req["inputs"].items():
        inputs[role] = np.load(spec["file"], allow_pickle=False)
    answer = {}
    if timing is None:
        outputs = target.run(problem, inputs)
    elif hasattr(target, "time"):
        outputs, times, what = target.time(problem, inputs, timing)
        answer = {"times_ms": _plain(times), "timer": what}
    else:
        outputs, times, what = _time_run(target, problem, inputs, timing)
        answer = {"times_ms": times, "timer": what}
    for role, spec in req["outputs"].items():
        if role not in outputs:
            raise RuntimeError(f"the target returned no {role} (returned: {', '.join(sorted(outputs))})")
        a = np.ascontiguousarray(outputs[role])
        want = np.dtype(_DTYPES[spec["dtype"]])
        if a.dtype != want:
            # Written as returned: kgate names the mismatch (an error of the run).
            pass
        np.save(spec["file"] + ".tmp.npy", a, allow_pickle=False)
        os.replace(spec["file"] + ".tmp.npy", spec["file"])
    return answer


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kgate.driver")
    ap.add_argument("--protocol", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--option", action="append", default=[])
    args = ap.parse_args(argv)

    # The channel: a private duplicate of stdout; fd 1 then points at stderr.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    if args.protocol != PROTOCOL:
        _answer(channel, {"kgate_protocol": PROTOCOL, "error": f"this driver speaks protocol {PROTOCOL}, not {args.protocol}"})
        return 2
    try:
        target = _load(args.target)
        options = dict(kv.split("=", 1) for kv in args.option)
        if hasattr(target, "configure"):
            target.configure(options)
        elif options:
            raise ValueError(f"{args.target} takes no options (given: {', '.join(options)})")
        what = target.describe() if hasattr(target, "describe") else args.target
    except Exception as e:  # the target cannot load: said in the handshake
        traceback.print_exc()
        _answer(channel, {"kgate_protocol": PROTOCOL, "error": f"{type(e).__name__}: {e}"})
        return 2
    _answer(channel, {"kgate_protocol": PROTOCOL, "driver": "kgate.driver", "target": args.target, "implementation": what})

    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        if op == "exit":
            return 0
        rid = req.get("id")
        try:
            if op == "supports":
                ok, why = target.supports(_problem(req)) if hasattr(target, "supports") else (True, "")
                _answer(channel, {"id": rid, "status": "ok"} if ok else {"id": rid, "status": "declined", "reason": why})
            elif op == "run":
                _answer(channel, {"id": rid, "status": "ok", **_run(target, req)})
            else:
                _answer(channel, {"id": rid, "status": "bad-request", "message": f"unknown op {op!r}"})
        except BadRequest as e:
            _answer(channel, {"id": rid, "status": "bad-request", "message": str(e)})
        except Declined as e:
            _answer(channel, {"id": rid, "status": "declined", "reason": str(e)})
        except Exception as e:
            traceback.print_exc()
            _answer(channel, {"id": rid, "status": "error", "message": f"{type(e).__name__}: {e}"})
    return 0


if __name__ == "__main__":
    # Run as kgate.driver (not __main__), so that the Declined a target
    # imports from kgate.driver is the class caught here.
    from kgate.driver import main as _main

    sys.exit(_main())
