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
       "outputs": {role: {"file": F, "dtype": T, "dims": [...]}}}
      {"op": "exit"}
  driver -> kgate (one answer per request, same id)
      {"id": N, "status": "ok"}                       (run: every output file written)
      {"id": N, "status": "declined", "reason": R}    (skipped, as is_supported)
      {"id": N, "status": "error", "message": M}      (the kernel failed: a verdict)

Tensors travel as .npy files (NDHWC, kgate's dtypes; bf16 as raw uint16
bits), never as JSON numbers. The target is MODULE's attribute ATTR (the
module itself without one) with:
    run(problem: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]
    supports(problem: dict) -> (bool, str)        optional; default: (True, "")
    configure(options: dict[str, str]) -> None    optional; the --option pairs
    describe() -> str                             optional; for the handshake
`problem` is the descriptor's JSON (`kgate desc D --json`) plus "descriptor",
"op_dir" ("conv3d.fwd", ...) and, for run, "inputs" and "outputs": role ->
{"dtype", "dims"}. run raises kgate.driver.Declined(reason) to
decline; any other exception is the kernel's error. The outputs must have the
requested dtype (float32, float16, uint16 for bf16) and dims: anything else
is an error of the run, which kgate reports naming the driver.

The protocol channel is a private copy of file descriptor 1; descriptor 1
itself (print, C extensions) goes to standard error, so stray output never
corrupts the channel.
"""

import argparse
import importlib
import json
import os
import sys
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
    channel.write(json.dumps(obj) + "\n")
    channel.flush()


def _problem(req):
    p = dict(req["problem"])
    p["descriptor"] = req["descriptor"]
    p["op_dir"] = req["descriptor"].split()[0]
    for side in ("inputs", "outputs"):
        if side in req:
            p[side] = {r: {"dtype": s["dtype"], "dims": s["dims"]} for r, s in req[side].items()}
    return p


def _run(target, req):
    import numpy as np

    problem = _problem(req)
    inputs = {}
    for role, spec in req["inputs"].items():
        inputs[role] = np.load(spec["file"], allow_pickle=False)
    outputs = target.run(problem, inputs)
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
                _run(target, req)
                _answer(channel, {"id": rid, "status": "ok"})
            else:
                _answer(channel, {"id": rid, "status": "bad-request", "message": f"unknown op {op!r}"})
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
