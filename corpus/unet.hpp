// The U-Net shape calculator: every conv3d, conv_transpose3d and GroupNorm
// problem of one ScaFFold training step, derived from the network description
// of docs/CORPUS.md. The corpus is generated from this, never
// typed by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"

namespace kgate::corpus {

struct Network {
  int scale = 7;           // volume 2^scale per side
  int bottleneck_dim = 3;  // levels = scale - bottleneck_dim
  std::int64_t in_channels = 3;
  std::int64_t stem_channels = 64;
  std::int64_t gn_groups = 8;
  double gn_eps = 1e-5;
  std::int64_t n_classes = 6;  // n_categories + 1
  int shards = 1;              // ranks along D
  DType act = DType::bf16;     // conv inputs/outputs under autocast
  DType gn_out = DType::fp32;  // GroupNorm output under autocast
  int levels() const { return scale - bottleneck_dim; }
  bool operator==(const Network&) const = default;
};

struct Configuration {
  std::string name;  // "A".."D"
  Network net;
};

// A, B, C, D of docs/CORPUS.md.
std::vector<Configuration> configurations();

// One problem of one training step, with who issues it.
struct Call {
  Problem problem;
  std::string site;   // layer name, e.g. "down2.conv1", "up1.convT", "inc.gn2"
  ShapeForm form;     // the form this problem is in
};

// Every problem one training step issues on one rank, in every shape form
// (logical, halo, adapter; forms that coincide appear once, as logical),
// every direction each layer needs (the stem's conv3d has no bwd_data).
std::vector<Call> training_step(const Network& net);

// The shapes corpus document for the given configurations: sorted, one entry
// per distinct (configuration, problem), with its sites and calls per step.
nlohmann::json shapes_document(const std::vector<Configuration>& configs);

// Stable text form of a corpus document (2-space indent, keys sorted,
// trailing newline).
std::string dump(const nlohmann::json& doc);

// Version of the generator: bump when the document format or the derivation
// changes; it is recorded in the provenance.
inline constexpr int kGeneratorVersion = 1;

}  // namespace kgate::corpus
