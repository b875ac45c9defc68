"""The census: every call one training step of kgate's U-Net (kgate.unet)
makes to a conv3d, conv_transpose3d or GroupNorm module, recorded by hooks
during a real forward and backward with stock PyTorch on the CPU.

    python3 -m kgate.census [--config A] [--scale S] [--out FILE|-] [--check] [--against-corpus]

Each call is a kgate problem: forward, and in the backward each module's
input gradient (when its input needs one: not the stem's) and weight (and
bias) gradient; GroupNorm forward and backward with its fused ReLU. Dtypes
are the configuration's (conv in `act`, GroupNorm `act` in, `gn_out` out:
what autocast gives on the GPU); the step itself runs in fp32, since only
shapes are recorded. `--scale S` runs the network at 2^S voxels per side
with the same levels (the bottleneck follows), which issues the same calls
with every extent divided by 2^(scale - S): `--against-corpus` scales the
census back and compares it with the corpus's logical-form entries of the
configuration (calls per step included), exit 1 on any difference.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

try:
    import torch
except ImportError as e:  # the census needs torch: exit 77, CTest's "skipped"
    print(f"kgate.census: skipped: torch is not installed for {sys.executable} ({e})", file=sys.stderr)
    sys.exit(77)

from . import _cli, unet
from .ops import conv_descriptor, groupnorm_descriptor


class Recorder:
    def __init__(self, cfg):
        self.cfg = cfg
        self.calls = collections.OrderedDict()  # structured key -> [sites]
        self.names = {}

    def add(self, key, site):
        self.calls.setdefault(key, []).append(site)

    def hook(self, model):
        for name, mod in model.named_modules():
            self.names[mod] = name
            if isinstance(mod, (torch.nn.Conv3d, torch.nn.ConvTranspose3d)):
                mod.register_forward_hook(self._conv)
            elif isinstance(mod, torch.nn.GroupNorm):
                mod.register_forward_hook(self._gn)

    def _conv(self, mod, inputs, out):
        x = inputs[0]
        op = "conv3d" if isinstance(mod, torch.nn.Conv3d) else "conv_transpose3d"
        pad = tuple(mod.padding)
        base = (op, x.shape[0], x.shape[1], mod.out_channels, tuple(x.shape[2:]), tuple(mod.kernel_size),
                tuple(mod.stride), pad, tuple(mod.dilation), mod.groups, getattr(mod, "output_padding", (0, 0, 0)))
        site = self._site(mod)
        has_bias = mod.bias is not None
        self.add(("conv", "fwd", has_bias) + base, site)
        if torch.is_grad_enabled():
            if x.requires_grad:
                self.add(("conv", "bwd_data", False) + base, site)
            self.add(("conv", "bwd_weight", has_bias) + base, site)

    def _gn(self, mod, inputs, out):
        x = inputs[0]
        base = (x.shape[0], x.shape[1], mod.num_groups, tuple(x.shape[2:]), mod.eps, mod.affine)
        site = self._site(mod)
        self.add(("gn", "fwd") + base, site)
        if torch.is_grad_enabled():
            self.add(("gn", "bwd") + base, site)

    def _site(self, mod):
        """The corpus's site names: inc.conv1, down2.gn1, up1.convT, outc.conv."""
        parts = self.names[mod].split(".")
        if parts[0] in ("down", "up"):
            parts = [f"{parts[0]}{int(parts[1]) + 1}"] + parts[2:]
        elif parts[0] == "upconv":
            parts = [f"up{int(parts[1]) + 1}", "convT"]
        elif parts[0] == "outc":
            parts = ["outc", "conv"]
        if parts[-1] == "norm":
            parts = parts[:-1]
        return ".".join(parts)


def descriptor(key, cfg, factor=1):
    """A recorded call's descriptor, spatial extents times `factor`."""
    act, gn_out = cfg["act"], cfg["gn_out"]
    if key[0] == "conv":
        _, direction, bias, op, n, cin, cout, spatial, kernel, stride, pad, dil, groups, opad = key
        spatial = tuple(s * factor for s in spatial)
        return conv_descriptor(op, direction, act, n, cin, cout, spatial, kernel, stride, pad, pad, dil, groups, bias, opad)
    _, direction, n, c, groups, spatial, eps, affine = key
    spatial = tuple(s * factor for s in spatial)
    return groupnorm_descriptor(direction, act, gn_out, n, c, groups, spatial, eps, affine, True)


def canonical(descriptors):
    """kgate's canonical form of each descriptor (`kgate desc`)."""
    out = {}
    for d in descriptors:
        p = subprocess.run([_cli.binary(), "desc", d, "--tensors"], capture_output=True, text=True)
        if p.returncode != 0:
            raise _cli.InputError(None, p.stderr.strip())
        out[d] = json.loads(p.stdout)["descriptor"]
    return out


def census(config="A", scale=None, corpus=None):
    cfg = dict(unet.configuration(config, corpus))
    full = cfg["scale"]
    if scale is not None:
        cfg["bottleneck_dim"] = cfg["bottleneck_dim"] - (full - scale)
        cfg["scale"] = scale
        if cfg["bottleneck_dim"] < 0:
            raise ValueError(f"--scale {scale} leaves no bottleneck for {cfg['levels']} levels")
    torch.manual_seed(0)
    model = unet.UNet3d(cfg, fast=False)
    rec = Recorder(cfg)
    rec.hook(model)
    x = torch.randn(model.input_shape())
    model(x).float().square().mean().backward()
    factor = 2 ** (full - cfg["scale"])
    keys = list(rec.calls)
    raw = {k: descriptor(k, cfg) for k in keys}
    canon = canonical(set(raw.values()))
    entries = collections.defaultdict(lambda: {"sites": set(), "calls": 0})
    for k in keys:
        e = entries[canon[raw[k]]]
        e["sites"].update(rec.calls[k])
        e["calls"] += len(rec.calls[k])
        e["key"] = k
    doc = {"provenance": {"generator": "python3 -m kgate.census", "config": config, "scale": cfg["scale"],
                          "corpus_scale": full},
           "calls": [{"descriptor": d, "op": d.split()[0], "sites": sorted(e["sites"]), "calls_per_step": e["calls"]}
                     for d, e in sorted(entries.items())]}
    return doc, {canon[raw[e["key"]]]: e for e in entries.values()}, cfg, factor


def against_corpus(config, scale, corpus=None):
    """Differences between the census (scaled to the corpus) and the
    corpus's logical entries of `config`: a list of lines, empty when equal."""
    doc, entries, cfg, factor = census(config, scale, corpus)
    scaled = canonical({descriptor(e["key"], cfg, factor) for e in entries.values()})
    mine = collections.Counter()
    for e in entries.values():
        mine[scaled[descriptor(e["key"], cfg, factor)]] += e["calls"]
    path = corpus or os.path.join(unet._HERE, "..", "..", "..", "corpus", "shapes.json")
    with open(path) as f:
        theirs = {p["descriptor"]: p["calls_per_step"] for p in json.load(f)["problems"]
                  if p["config"] == config and p["form"] == "logical"}
    diff = []
    for d in sorted(set(mine) | set(theirs)):
        if mine.get(d) != theirs.get(d):
            diff.append(f"{d}: census {mine.get(d, 0)} calls per step, corpus {theirs.get(d, 0)}")
    return diff


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kgate.census")
    ap.add_argument("--config", default="A")
    ap.add_argument("--scale", type=int, default=None, help="run at 2^S voxels per side (same levels)")
    ap.add_argument("--corpus", default=None, help="shapes corpus (default: the source tree's)")
    ap.add_argument("--out", default="-", help="census file ('-': standard output)")
    ap.add_argument("--check", action="store_true", help="fail unless --out holds this census byte for byte")
    ap.add_argument("--against-corpus", action="store_true", help="compare with the corpus's calls per step")
    a = ap.parse_args(argv)
    if a.against_corpus:
        diff = against_corpus(a.config, a.scale, a.corpus)
        for line in diff:
            print(line, file=sys.stderr)
        print(f"census vs corpus ({a.config}): {'equal' if not diff else f'{len(diff)} differences'}", file=sys.stderr)
        return 1 if diff else 0
    doc = census(a.config, a.scale, a.corpus)[0]
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if a.check:
        try:
            with open(a.out) as f:
                old = f.read()
        except OSError as e:
            print(f"kgate.census: error: --out: {e}", file=sys.stderr)
            return 2
        if old != text:
            print(f"kgate.census: {a.out} differs from the census; run `python3 -m kgate.census --out {a.out}`",
                  file=sys.stderr)
            return 3  # not 1: an uncaught Python error exits 1, and that is not "differs"
        print(f"kgate.census: {a.out} is current", file=sys.stderr)
        return 0
    if a.out == "-":
        sys.stdout.write(text)
    else:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
