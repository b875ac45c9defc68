#include "corpus/unet.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "reference/descriptor.hpp"
#include "reference/json.hpp"

namespace kgate::corpus {

std::vector<Configuration> configurations() {
  Network a;  // scale 7, one GPU
  Network b = a;
  b.scale = 8;
  Network c = b;
  c.shards = 2;
  Network d = b;
  d.shards = 4;
  return {{"A", a}, {"B", b}, {"C", c}, {"D", d}};
}

namespace {

// One rank's spatial extent at a resolution of `side` voxels per axis.
Axis3 local(const Network& net, std::int64_t side) {
  if (side % net.shards != 0) throw std::logic_error("D extent not divisible by shards");
  return {side / net.shards, side, side};
}

// The k=3 s=1 p=1 conv of a DoubleConv in each of its shape forms.
std::vector<Call> conv3_forms(const Network& net, std::int64_t cin, std::int64_t cout, std::int64_t side,
                              const std::string& site, bool needs_bwd_data) {
  ConvProblem base;
  base.op = ConvOp::conv3d;
  base.n = 1;
  base.cin = cin;
  base.cout = cout;
  base.kernel = {3, 3, 3};
  base.src = base.dst = net.act;
  base.acc = DType::fp32;
  const Axis3 ext = local(net, side);

  ConvProblem logical = base;
  logical.in = ext;
  logical.pad_front = logical.pad_back = {1, 1, 1};

  ConvProblem halo = base;
  halo.form = ShapeForm::halo;
  halo.halo = {1, 1, 1};
  halo.in = {ext[0] + 2, ext[1] + 2, ext[2] + 2};

  std::vector<ConvProblem> forms{logical, halo};
  if (net.shards > 1) {  // unsharded, the adapter form is the logical form
    ConvProblem adapter = base;
    adapter.form = ShapeForm::adapter;
    adapter.halo = {1, 0, 0};
    adapter.in = {ext[0] + 2, ext[1], ext[2]};
    adapter.pad_front = adapter.pad_back = {0, 1, 1};
    forms.push_back(adapter);
  }
  std::vector<Call> calls;
  for (const ConvProblem& f : forms) {
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}) {
      if (dir == ConvDir::bwd_data && !needs_bwd_data) continue;
      ConvProblem p = f;
      p.dir = dir;
      calls.push_back({p, site, p.form});
    }
  }
  return calls;
}

std::vector<Call> groupnorm(const Network& net, std::int64_t c, std::int64_t side, const std::string& site) {
  std::vector<Call> calls;
  for (GnDir dir : {GnDir::fwd, GnDir::bwd}) {
    GroupNormProblem p;
    p.dir = dir;
    p.n = 1;
    p.c = c;
    p.groups = net.gn_groups;
    p.spatial = local(net, side);  // statistics per shard, as the benchmark does
    p.eps = net.gn_eps;
    p.affine = true;
    p.relu = true;
    p.src = net.act;
    p.dst = net.gn_out;
    calls.push_back({p, site, ShapeForm::logical});
  }
  return calls;
}

void append(std::vector<Call>& to, std::vector<Call> from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

// DoubleConv = twice [conv k3 s1 p1 no bias -> GroupNorm(+ReLU)].
void double_conv(std::vector<Call>& calls, const Network& net, std::int64_t cin, std::int64_t cout,
                 std::int64_t side, const std::string& block, bool first_needs_bwd_data) {
  append(calls, conv3_forms(net, cin, cout, side, block + ".conv1", first_needs_bwd_data));
  append(calls, groupnorm(net, cout, side, block + ".gn1"));
  append(calls, conv3_forms(net, cout, cout, side, block + ".conv2", true));
  append(calls, groupnorm(net, cout, side, block + ".gn2"));
}

}  // namespace

std::vector<Call> training_step(const Network& net) {
  std::vector<Call> calls;
  const std::int64_t top = std::int64_t{1} << net.scale;
  // Encoder: the stem (its input has no gradient), then Down = MaxPool + DoubleConv.
  double_conv(calls, net, net.in_channels, net.stem_channels, top, "inc", false);
  std::int64_t ch = net.stem_channels;
  for (int l = 1; l <= net.levels(); ++l) {
    double_conv(calls, net, ch, 2 * ch, top >> l, "down" + std::to_string(l), true);
    ch *= 2;
  }
  // Decoder: Up = ConvTranspose3d(C -> C/2, k2 s2, bias), concat skip, DoubleConv(C -> C/2).
  for (int l = 1; l <= net.levels(); ++l) {
    const std::int64_t side = top >> (net.levels() - l);  // output resolution of this Up
    ConvProblem t;
    t.op = ConvOp::conv_transpose3d;
    t.n = 1;
    t.cin = ch;
    t.cout = ch / 2;
    t.in = local(net, side / 2);
    t.kernel = {2, 2, 2};
    t.stride = {2, 2, 2};
    t.bias = true;
    t.src = t.dst = net.act;
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}) {
      t.dir = dir;
      t.bias = dir != ConvDir::bwd_data;  // bwd_data has no bias tensor
      calls.push_back({t, "up" + std::to_string(l) + ".convT", ShapeForm::logical});
    }
    double_conv(calls, net, ch, ch / 2, side, "up" + std::to_string(l), true);
    ch /= 2;
  }
  // Head: Conv3d(64 -> n_classes, k=1, bias).
  ConvProblem h;
  h.n = 1;
  h.cin = ch;
  h.cout = net.n_classes;
  h.in = local(net, top);
  h.bias = true;
  h.src = h.dst = net.act;
  for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}) {
    h.dir = dir;
    h.bias = dir != ConvDir::bwd_data;  // bwd_data has no bias tensor
    calls.push_back({h, "outc.conv", ShapeForm::logical});
  }
  for (const Call& c : calls) validate(c.problem);
  return calls;
}

nlohmann::json shapes_document(const std::vector<Configuration>& configs) {
  using nlohmann::json;
  json problems = json::array();
  json cfgs = json::array();
  for (const Configuration& cfg : configs) {
    const Network& n = cfg.net;
    cfgs.push_back({{"name", cfg.name},
                    {"scale", n.scale},
                    {"bottleneck_dim", n.bottleneck_dim},
                    {"levels", n.levels()},
                    {"in_channels", n.in_channels},
                    {"stem_channels", n.stem_channels},
                    {"gn_groups", n.gn_groups},
                    {"gn_eps", n.gn_eps},
                    {"n_classes", n.n_classes},
                    {"shards", n.shards},
                    {"act", name(n.act)},
                    {"gn_out", name(n.gn_out)}});
    // Distinct problems, keyed by their canonical descriptor.
    std::map<std::string, std::pair<Call, std::map<std::string, int>>> distinct;
    for (const Call& c : training_step(n)) {
      auto [it, fresh] = distinct.try_emplace(to_descriptor(c.problem), c, std::map<std::string, int>{});
      it->second.second[c.site] += 1;
    }
    for (const auto& [desc, entry] : distinct) {
      int calls = 0;
      json sites = json::array();
      for (const auto& [site, count] : entry.second) {
        sites.push_back(site);
        calls += count;
      }
      problems.push_back({{"config", cfg.name},
                          {"descriptor", desc},
                          {"op", op_dir_name(entry.first.problem)},
                          {"form", name(entry.first.form)},
                          {"sites", sites},
                          {"calls_per_step", calls},
                          {"problem", to_json(entry.first.problem)}});
    }
  }
  return json{{"provenance",
               {{"generator", "kgate corpus make"},
                {"generator_version", kGeneratorVersion},
                {"source", "docs/CORPUS.md network description"}}},
              {"configurations", cfgs},
              {"problems", problems}};
}

std::string dump(const nlohmann::json& doc) { return doc.dump(2) + "\n"; }

}  // namespace kgate::corpus
