import json, os, sys
sys.path[:0] = ["tools/python", "tools/python/tests"]
import numpy as np
import torch
import kgate
cases = json.load(open("tools/python/_torchcheck/cases.json"))
descs = {c["descriptor"]: c["desc"] for c in cases}
kgate.describe = lambda d: descs[d]
import test_torch
print("torch", torch.__version__)
for c in cases:
    inp = kgate.Inputs.load("tools/python/_torchcheck/" + c["name"])
    out = getattr(test_torch, "torch_" + c["kind"])(inp, **c["kwargs"])
    os.makedirs(os.path.join(os.environ["OUT"], c["name"]), exist_ok=True)
    for r, a in out.items():
        np.save(os.path.join(os.environ["OUT"], c["name"], r + ".npy"), a)
    print(c["name"], {r: (a.dtype.str, a.shape) for r, a in out.items()})
