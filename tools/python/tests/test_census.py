"""The census (kgate.census) against the corpus: equal for configuration A,
and a corpus that drifted from the network is caught."""

import json
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason=f"torch not installed for {sys.executable}: the census is not tested")

from kgate import census, unet  # noqa: E402


def corpus_copy(tmp_path, edit):
    with open(os.path.join(unet._HERE, "..", "..", "..", "corpus", "shapes.json")) as f:
        doc = json.load(f)
    edit(doc)
    p = tmp_path / "shapes.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_census_equals_the_corpus_at_two_scales():
    assert census.against_corpus("A", 5) == []
    assert census.against_corpus("A", 4) == []


def test_a_changed_count_is_a_difference(tmp_path):
    def edit(doc):
        for p in doc["problems"]:
            if p["config"] == "A" and p["form"] == "logical" and p["op"] == "groupnorm.fwd":
                p["calls_per_step"] += 1
                return
    diff = census.against_corpus("A", 4, corpus_copy(tmp_path, edit))
    assert len(diff) == 1 and "groupnorm.fwd" in diff[0], diff


def test_a_changed_network_is_a_difference(tmp_path):
    def edit(doc):
        for c in doc["configurations"]:
            if c["name"] == "A":
                c["gn_groups"] = 4
    diff = census.against_corpus("A", 4, corpus_copy(tmp_path, edit))
    assert any("groupnorm" in d for d in diff), diff


def test_unet_state_dicts_load_both_ways():
    cfg = dict(unet.configuration("A"))
    cfg.update(scale=4, bottleneck_dim=0)
    fast, stock = unet.UNet3d(cfg, fast=True), unet.UNet3d(cfg, fast=False)
    stock.load_state_dict(fast.state_dict())
    fast.load_state_dict(stock.state_dict())
    assert set(fast.state_dict()) == set(stock.state_dict())


def test_a_fast_unet_step_runs_on_kgate_everywhere():
    from kgate import nn as knn
    from kgate import ops
    if ops.library("host") is None:
        pytest.skip(f"libkgate_ops_host.so not found ({ops.library_error('host')})")
    cfg = dict(unet.configuration("A"))
    cfg.update(scale=3, bottleneck_dim=-1, levels=2, stem_channels=8)
    m = unet.UNet3d(cfg, fast=True).to(memory_format=torch.channels_last_3d)
    x = torch.randn(m.input_shape()).contiguous(memory_format=torch.channels_last_3d)
    knn.report(reset=True)
    m(x).square().mean().backward()
    r = knn.report()
    assert all(rung == "kgate" for (_, rung) in r), r
    assert sum(r.values()) == 2 * 2 * (1 + 2 * 2) + 2 + 1  # convs and GroupNorms of inc, 2 down, 2 up; 2 convT; outc
    assert all(p.grad is not None for p in m.parameters())
