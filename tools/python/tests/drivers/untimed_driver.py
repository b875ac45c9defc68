"""A protocol-1 driver that knows no timing field: it ignores the fields of
a request it does not know, as a driver written before the field does, and
runs numpy_backend.correct. The tests start it in place of `python3 -m
kgate.driver` (KGATE_PYTHON names a script that runs this file)."""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy_backend  # noqa: E402


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    answer({"kgate_protocol": 1, "driver": "untimed_driver"})
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "exit":
            return
        if req["op"] == "run":
            problem = dict(req["problem"], descriptor=req["descriptor"], op_dir=req["descriptor"].split()[0])
            for side in ("inputs", "outputs"):
                problem[side] = {r: {"dtype": s["dtype"], "dims": s["dims"]} for r, s in req[side].items()}
            inputs = {r: np.load(s["file"]) for r, s in req["inputs"].items()}
            for r, a in numpy_backend.correct.run(problem, inputs).items():
                np.save(req["outputs"][r]["file"], a)
        answer({"id": req["id"], "status": "ok"})


main()
