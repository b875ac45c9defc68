"""The ScaFFold-shaped 3D U-Net of kgate's corpus, built from the network
parameters the corpus's shape calculator recorded (corpus/shapes.json,
"configurations": written by `kgate corpus make` from corpus/unet.cpp), so
that the model, the corpus and the census describe one network:

  inc     DoubleConv(in_channels -> stem)
  downL   MaxPool3d(2), DoubleConv(C -> 2C)                 L = 1..levels
  upL     ConvTranspose3d(C -> C/2, k2 s2, bias), concat the skip, DoubleConv(C -> C/2)
  outc    Conv3d(stem -> n_classes, k1, bias)
  DoubleConv = twice [Conv3d k3 p1 no bias -> GroupNorm(gn_groups) + ReLU]

`fast=True` builds it from kgate.nn's modules, `fast=False` from stock
torch.nn (the same parameter names: a state_dict loads both ways).
"""

import json
import os

import torch
from torch import nn

from . import nn as knn

_HERE = os.path.dirname(os.path.abspath(__file__))


def configuration(name="A", corpus=None):
    """The network parameters of configuration `name` as the corpus records them."""
    paths = [corpus] if corpus else [os.path.join(_HERE, "..", "..", "..", "corpus", "shapes.json"),
                                     os.path.join(_HERE, "..", "..", "..", "share", "kgate", "corpus", "shapes.json")]
    for p in paths:
        if p and os.path.exists(p):
            with open(p) as f:
                for c in json.load(f)["configurations"]:
                    if c["name"] == name:
                        return c
            raise KeyError(f"no configuration {name!r} in {p}")
    raise FileNotFoundError(f"corpus/shapes.json not found (looked in {', '.join(x for x in paths if x)})")


class GNReLU(nn.Module):
    """GroupNorm followed by ReLU: kgate's fused kernel when fast, else stock."""

    def __init__(self, groups, channels, eps, fast):
        super().__init__()
        if fast:
            self.norm = knn.FastGroupNorm(groups, channels, eps=eps, relu=True)
        else:
            self.norm = nn.GroupNorm(groups, channels, eps=eps)
        self.fast = fast

    def forward(self, x):
        y = self.norm(x)
        return y if self.fast else torch.relu(y)


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, cfg, fast):
        super().__init__()
        Conv = knn.FastConv3d if fast else nn.Conv3d
        self.conv1 = Conv(cin, cout, 3, padding=1, bias=False)
        self.gn1 = GNReLU(cfg["gn_groups"], cout, cfg["gn_eps"], fast)
        self.conv2 = Conv(cout, cout, 3, padding=1, bias=False)
        self.gn2 = GNReLU(cfg["gn_groups"], cout, cfg["gn_eps"], fast)

    def forward(self, x):
        return self.gn2(self.conv2(self.gn1(self.conv1(x))))


class UNet3d(nn.Module):
    def __init__(self, cfg, fast=False):
        super().__init__()
        self.cfg = cfg
        ch = cfg["stem_channels"]
        self.inc = DoubleConv(cfg["in_channels"], ch, cfg, fast)
        self.down = nn.ModuleList()
        for _ in range(cfg["levels"]):
            self.down.append(DoubleConv(ch, 2 * ch, cfg, fast))
            ch *= 2
        ConvT = knn.FastConvTranspose3d if fast else nn.ConvTranspose3d
        self.upconv = nn.ModuleList()
        self.up = nn.ModuleList()
        for _ in range(cfg["levels"]):
            self.upconv.append(ConvT(ch, ch // 2, 2, stride=2, bias=True))
            self.up.append(DoubleConv(ch, ch // 2, cfg, fast))
            ch //= 2
        Conv = knn.FastConv3d if fast else nn.Conv3d
        self.outc = Conv(ch, cfg["n_classes"], 1, bias=True)

    def forward(self, x):
        # Activations stay channels_last_3d (NDHWC memory): where max_pool3d
        # or cat return another layout (PyTorch's CPU kernels do), they are
        # put back, so that kgate's modules read them in place.
        cl = torch.channels_last_3d
        skips = [self.inc(x.contiguous(memory_format=cl))]
        for d in self.down:
            skips.append(d(torch.nn.functional.max_pool3d(skips[-1], 2).contiguous(memory_format=cl)))
        y = skips.pop()
        for t, u in zip(self.upconv, self.up):
            y = u(torch.cat([skips.pop(), t(y)], dim=1).contiguous(memory_format=cl))
        return self.outc(y)

    def input_shape(self, batch=1):
        side = 2 ** self.cfg["scale"]
        return (batch, self.cfg["in_channels"], side // self.cfg.get("shards", 1), side, side)
