// The gate's boundary problems of the conv kernels (kernels::boundary_problems
// for the six conv operator-directions), found by asking the plan itself:
// every candidate is a small problem, and a candidate is kept when conv_plan
// gives it the plan value or boundary wanted (a tile width bn, a ragged last
// tile, a split count, matrix cores or not, one tap or not, ...). The
// generator reads only plans (kernel names, params, reductions) and
// conv_supported, never the kernels' constants, so it follows the plan's
// rules when they change. Compiled once per backend, like conv3d.cpp.
#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "kernels/conv3d/conv3d.hpp"
#include "kernels/conv3d/conv_kernels.hpp"
#include "kernels/driver.hpp"
#include "reference/descriptor.hpp"

namespace kgate::kernels {

// A named namespace: the CUDA build compiles this file in one unit with conv3d.cpp.
namespace conv_boundary_detail {

enum class Family { contract, scatter, wgrad };

// The plan parameter, or `otherwise` when the plan has none of that name.
std::int64_t param(const Plan& pl, const char* key, std::int64_t otherwise = 0) {
  const auto it = pl.params.find(key);
  return it == pl.params.end() ? otherwise : it->second;
}

bool is_mma(const Plan& pl) { return pl.variant.rfind("mma", 0) == 0; }

struct Gen {
  ConvOp op = ConvOp::conv3d;
  ConvDir dir = ConvDir::fwd;
  Family fam = Family::contract;
  std::vector<std::pair<DType, DType>> pairs = supported_pairs();
  std::vector<BoundaryProblem> out;
  std::set<std::string> seen;
  int variant = 0;

  bool has_bias() const { return dir != ConvDir::bwd_data; }

  // A problem with csg / clg channels per group on the small / large side
  // (reference/conv3d/conv_geometry.hpp), a 1-tap 1x1x1 kernel, stride 1,
  // spatial extent `sp` on the side the operator's input x lives on.
  ConvProblem make(std::int64_t csg, std::int64_t clg, std::int64_t groups, Axis3 sp, std::int64_t n = 1) const {
    ConvProblem p;
    p.op = op;
    p.dir = dir;
    p.n = n;
    p.groups = groups;
    const bool t = op == ConvOp::conv_transpose3d;
    p.cin = (t ? csg : clg) * groups;
    p.cout = (t ? clg : csg) * groups;
    p.in = sp;
    p.src = p.dst = DType::fp32;
    return p;
  }
  void types(ConvProblem& p, std::pair<DType, DType> t) const {
    p.src = t.first;
    p.dst = t.second;
  }
  // The next dtype pair in turn (so that every family meets every pair).
  std::pair<DType, DType> next_pair() const { return pairs[static_cast<std::size_t>(variant) % pairs.size()]; }

  // Whether csg / clg channels per group, rows w and dtype pair t select
  // the family's matrix-core kernel (one tap, one sample, one group).
  bool mma_at(std::int64_t csg, std::int64_t clg, std::pair<DType, DType> t, std::int64_t w = 1024) const {
    ConvProblem p = make(csg, clg, 1, {1, 1, w});
    types(p, t);
    return is_mma(conv_plan(p));
  }

  // Keeps p (once per descriptor): it must be valid and supported.
  void add(ConvProblem p, const std::string& why) {
    p.validate();
    if (const Support s = conv_supported(p); !s) throw std::logic_error("conv boundary problem not supported (" + why + "): " + s.reason);
    if (!seen.insert(to_descriptor(p)).second) return;
    const Plan pl = conv_plan(p);
    out.push_back({Problem(p), why + " [" + pl.steps.front().kernel + "]"});
    ++variant;
  }
};

// The channel count along the GEMM's N (what bn tiles) and along its M where
// M is channels (wgrad: csg), per family.
void set_n_channels(Gen& g, ConvProblem& p, std::int64_t v) {
  const bool t = g.op == ConvOp::conv_transpose3d;
  // contract: N = csg; scatter and wgrad: N = clg.
  const bool small = g.fam == Family::contract;
  std::int64_t& c = (small != t) ? p.cout : p.cin;
  c = v * p.groups;
}

// The channel count along the GEMM's K per tap: contract K = clg, scatter
// K = csg.
void set_k_channels(Gen& g, ConvProblem& p, std::int64_t v) {
  const bool t = g.op == ConvOp::conv_transpose3d;
  const bool small = g.fam == Family::scatter;
  std::int64_t& c = (small != t) ? p.cout : p.cin;
  c = v * p.groups;
}

// The portable tile widths: every bn the plan chooses over N = 1 .. kSweep
// channels, for each the smallest N (a ragged last column tile) and the N
// that fills its tiles exactly; for the widest bn also two column tiles, the
// second ragged. M is ragged where N is and full where N is full (contract
// and scatter: positions; wgrad: csg rows of the weight gradient).
constexpr std::int64_t kSweep = 1024;

void tile_cases(Gen& g) {
  // The other channel count stays below what fills a matrix-core atom:
  // these are the portable kernels' tiles.
  struct Seen {
    std::int64_t first = 0, full = 0, tile_n = 0, tile_m = 0;
  };
  std::map<std::int64_t, Seen> by_bn;
  for (std::int64_t nch = 1; nch <= kSweep; ++nch) {
    ConvProblem p = g.make(1, 1, 1, {1, 1, 1});
    set_n_channels(g, p, nch);
    const Plan pl = conv_plan(p);
    if (is_mma(pl)) continue;
    const std::int64_t bn = param(pl, "bn", 1);
    Seen& s = by_bn[bn];
    const std::int64_t cols = param(pl, "tile_n") * bn;
    if (!s.first) s = {nch, 0, param(pl, "tile_n"), param(pl, "tile_m") * param(pl, "bm")};
    if (nch % cols == 0 && !s.full) s.full = nch;
  }
  const std::int64_t widest = by_bn.rbegin()->first;
  for (const auto& [bn, s] : by_bn) {
    const std::int64_t rows = s.tile_m;  // M per workgroup
    const std::int64_t cols = s.tile_n * bn;
    auto one = [&](std::int64_t nch, bool ragged, const std::string& what) {
      ConvProblem p = g.make(1, 1, 1, {1, 1, 1});
      g.types(p, g.next_pair());
      set_n_channels(g, p, nch);
      // M: one full workgroup of rows and one more row (ragged), or two full.
      const std::int64_t m = ragged ? rows + 1 + g.variant % 3 : 2 * rows;
      if (g.fam == Family::wgrad) {
        // wgrad's M is csg (the small side's channels); K the positions.
        (g.op == ConvOp::conv_transpose3d ? p.cin : p.cout) = m;
        p.in = {1, 2, 3 + g.variant % 2};
      } else {
        p.in = {1, 1, m};
      }
      p.bias = g.has_bias() && g.variant % 2 == 0;
      const Plan pl = conv_plan(p);
      if (param(pl, "bn", 1) != bn) throw std::logic_error("conv boundary: bn moved under M");
      g.add(p, "bn=" + std::to_string(bn) + ", N=" + std::to_string(nch) + " " + what + ", M " +
                   (ragged ? "ragged" : "two full tiles"));
    };
    one(s.first, true, s.first % cols ? "ragged last column tile" : "one full column tile");
    if (s.full) one(s.full, false, "full column tiles");
    if (bn == widest) {
      one(cols + 1, true, "two column tiles, the second ragged");
      one(2 * cols, false, "two full column tiles");
    }
  }
}

// Every dtype pair through the family's portable kernel (and, for the
// contract family, its matrix-core kernel where the pair has one), with
// groups, bias, padding and a stride.
void instantiations(Gen& g) {
  for (const auto& t : g.pairs) {
    ConvProblem p = g.make(3, 2, 2, {3, 4, 5}, 2);
    g.types(p, t);
    p.kernel = {2, 3, 1};
    p.pad_front = p.pad_back = {1, 1, 0};
    p.stride = {1, 2, 1};
    p.bias = g.has_bias();
    g.add(p, "instantiation " + std::string(name(t.first)) + ":" + std::string(name(t.second)) +
                 ", groups 2, padding, stride (1,2,1)");
  }
}

// Geometry: the smallest problem, padding past both ends, strides and
// dilations per axis, a ragged last window, batch > 1, depthwise groups.
void geometry_cases(Gen& g) {
  {
    ConvProblem p = g.make(1, 1, 1, {1, 1, 1});
    g.types(p, g.next_pair());
    g.add(p, "smallest: n1 c1 k1, 1x1x1, one tap");
    p.bias = g.has_bias();
    g.types(p, g.next_pair());
    g.add(p, "smallest with bias");
  }
  {
    ConvProblem p = g.make(2, 3, 1, {5, 6, 7}, 2);
    g.types(p, g.next_pair());
    p.kernel = {3, 2, 3};
    p.stride = {2, 1, 3};
    p.pad_front = {1, 0, 2};
    p.pad_back = {2, 1, 0};
    p.dilation = {1, 2, 1};
    if (g.op == ConvOp::conv_transpose3d) p.pad_back = p.pad_front, p.output_padding = {1, 0, 2};
    p.bias = g.has_bias();
    g.add(p, "per-axis kernel/stride/padding/dilation, batch 2");
  }
  {
    ConvProblem p = g.make(1, 1, 6, {4, 3, 5});
    g.types(p, g.next_pair());
    p.kernel = {3, 3, 3};
    p.pad_front = p.pad_back = {1, 1, 1};
    p.bias = g.has_bias();
    g.add(p, "depthwise (6 groups of one channel), k3 p1");
  }
  {
    // Taps reaching past both ends of the input on every axis.
    ConvProblem p = g.make(2, 2, 1, {2, 2, 2});
    g.types(p, g.next_pair());
    p.kernel = {3, 3, 3};
    p.dilation = {2, 2, 2};
    p.pad_front = p.pad_back = {3, 2, 3};
    // conv_transpose3d's padding crops its output (which must keep a position).
    if (g.op == ConvOp::conv_transpose3d) p.pad_front = p.pad_back = {2, 2, 1};
    g.add(p, "padding wider than the input (taps outside on both sides), dilation 2");
  }
}

// The W-halo step of a plan, as words (conv_kernels.hpp halo_taps).
std::string halo_name(const Plan& pl) {
  const std::int64_t h = param(pl, "halo_taps");
  return h > 0 ? "W-halo step of " + std::to_string(h) + " taps" : "tap-major steps";
}

// Matrix cores (contract and scatter families, conv_mma): the smallest
// channels that select them, one below each (portable with the same dtype),
// and ragged / full / multiple atom tiles along M, N and K for every pair
// that has an atom. n and k are the GEMM's N and per-tap K channels
// (contract: csg and clg; scatter: clg and csg).
void mma_cases(Gen& g) {
  const bool sc = g.fam == Family::scatter;
  auto make_nk = [&](std::int64_t n, std::int64_t k, std::int64_t groups, Axis3 sp, std::int64_t batch) {
    return sc ? g.make(k, n, groups, sp, batch) : g.make(n, k, groups, sp, batch);
  };
  auto at = [&](std::int64_t n, std::int64_t k, std::pair<DType, DType> t, std::int64_t w = 1024) {
    return sc ? g.mma_at(k, n, t, w) : g.mma_at(n, k, t, w);
  };
  // Probed with rows to spare (the plan also asks the GEMM rows to fill a
  // block tile); the smallest row count is found after the channels.
  bool split_done = false;
  for (const auto& t : g.pairs) {
    std::int64_t kmin = 0, nmin = 0;
    for (std::int64_t c = 1; c <= 256 && !kmin; ++c)
      if (at(256, c, t)) kmin = c;
    if (!kmin) continue;  // no atom for this pair
    for (std::int64_t c = 1; c <= 256 && !nmin; ++c)
      if (at(c, kmin, t)) nmin = c;
    std::int64_t wmin = 0;
    for (std::int64_t w = 1; w <= 1024 && !wmin; ++w)
      if (at(nmin, kmin, t, w)) wmin = w;
    const std::string pn = std::string(name(t.first)) + ":" + std::string(name(t.second));
    ConvProblem base = make_nk(nmin, kmin, 1, {1, 1, wmin}, 1);
    g.types(base, t);
    const Plan pl = conv_plan(base);
    const std::int64_t tm = param(pl, "tile_m"), tn = param(pl, "tile_n"), ak = param(pl, "atom_k");
    {
      ConvProblem p = base;
      g.add(p, "matrix cores " + pn + ": the smallest channels and rows that select them (K channels " +
                   std::to_string(kmin) + ", N channels " + std::to_string(nmin) + ", rows " + std::to_string(wmin) + ")");
      ConvProblem q = p;
      q.in = {1, 1, wmin - 1};
      if (wmin > 1) g.add(q, "portable " + pn + ": one GEMM row below matrix cores");
      q = p;
      set_n_channels(g, q, nmin - 1);
      if (nmin > 1) g.add(q, "portable " + pn + ": one output channel below matrix cores");
      q = p;
      set_k_channels(g, q, kmin - 1);
      if (kmin > 1) g.add(q, "portable " + pn + ": one reduction channel below matrix cores");
    }
    {
      // Two atom tiles along M and N, the second ragged; K not whole atoms.
      ConvProblem p = make_nk(tn + 1 + g.variant % 5, ak + 1, 2, {1, 1, tm + 3}, 1);
      g.types(p, t);
      p.kernel = {1, 1, 3};
      p.pad_front = p.pad_back = {0, 0, 1};
      p.bias = g.has_bias();
      g.add(p, "matrix cores " + pn + ": ragged M, N and K tiles, groups 2, padding");
    }
    {
      // Whole tiles along M, N and K, batch 2, stride and dilation (the
      // scatter family: stride phases with one and with two taps).
      ConvProblem p = make_nk(tn, 2 * ak, 1, {1, 1, 1}, 2);
      g.types(p, t);
      p.kernel = {1, 2, 2};
      p.dilation = {1, 2, 1};
      p.stride = {2, 1, 2};
      // Output positions per sample tm / 2 (two samples: one full M tile).
      const std::int64_t w = tm / 4;  // positions along W; D = 2 after s2, H = 1 after k2 d2
      p.in = {3, 3, 2 * w};           // out = (2, 1, w)
      if (g.op == ConvOp::conv_transpose3d) p.pad_back = p.pad_front;
      p.bias = g.has_bias();  // with whole channel runs: sm_90's staged epilogue adds it
      g.add(p, "matrix cores " + pn + ": whole M, N and K tiles, batch 2, stride 2 (D, W), dilation 2, bias");
    }
    {
      // The W-halo step where the plan names one (asynchronous copies):
      // 16-position segments (W 16: eight per tile, ragged M past the
      // second tile's first segment, K channels half an atom past whole
      // ones, a ragged column tile, bias; the scatter family without W
      // padding, so that its rows' W (16, over L) differs from S's 14),
      // and a 128-position segment with two W taps 2 apart and two groups
      // (contract: a stride along D; the scatter family's step needs one
      // stride phase).
      const bool ct = g.op == ConvOp::conv_transpose3d;
      ConvProblem p = make_nk(tn + 8, ak + 8, 1, {3, 3, sc && ct ? 14 : 16}, 1);
      g.types(p, t);
      p.kernel = {3, 3, 3};
      p.pad_front = p.pad_back = {1, 1, sc ? 0 : 1};
      p.bias = g.has_bias();
      g.add(p, "matrix cores " + pn + ": 3x3x3 over W 16 (" + halo_name(conv_plan(p)) +
                   "), ragged M, N and K, bias");
      // D taps 2 apart too (a pair's D offset uses D's dilation, not W's or H's).
      ConvProblem q = make_nk(tn, ak, 2, {3, 3, 128}, 1);
      g.types(q, t);
      q.kernel = {2, 1, 2};
      q.stride = {sc ? 1 : 2, 1, 1};
      q.dilation = {2, 1, 2};
      q.pad_front = q.pad_back = {0, 0, 1};
      g.add(q, "matrix cores " + pn + ": W and D taps 2 apart over W 128 (" + halo_name(conv_plan(q)) + "), stride " +
                   std::to_string(q.stride[0]) + " along D, groups 2");
    }
    if (!split_done) {
      // The split of K by taps (one pair per operator-direction: the long
      // K is what makes them slow to emulate): one block tile over 27 taps
      // of 320 K channels, 270 block steps in runs of 7 taps (the last 6),
      // and of 256 channels, 216 steps in three even runs; the first with
      // a bias (added by the tree) and two column tiles, the second ragged.
      split_done = true;
      for (const std::int64_t kc : {std::int64_t{320}, std::int64_t{256}}) {
        ConvProblem p = make_nk(kc == 320 ? tn + 8 : tn, kc, 1, {4, 4, 8}, 1);
        g.types(p, t);
        p.kernel = {3, 3, 3};
        p.pad_front = p.pad_back = {1, 1, 1};
        p.bias = kc == 320 && g.has_bias();
        const Plan sp = conv_plan(p);
        g.add(p, "matrix cores " + pn + ": K split by taps (" + std::to_string(param(sp, "splits", 1)) + " runs of " +
                     std::to_string(param(sp, "tap_split")) + " taps)" + (p.bias ? ", bias" : ""));
      }
    }
  }
  // Few output channels over whole 16-byte source runs (the 1x1x1 head's 6
  // over 64) on matrix cores, and the source channels one run short of a
  // block step (portable).
  if (g.fam == Family::contract) {
    for (const std::int64_t kc : {std::int64_t{cv::kMmaBK}, std::int64_t{cv::kMmaBK - cv::kMmaVec}}) {
      ConvProblem p = g.make(6, kc, 1, {2, 8, 8});
      g.types(p, {DType::bf16, DType::bf16});
      p.bias = g.has_bias();
      g.add(p, std::string(kc >= cv::kMmaBK ? "matrix cores" : "portable") + ": 6 output channels over " +
                   std::to_string(kc) + " source channels (whole 16-byte runs)" + (p.bias ? ", bias" : ""));
    }
  }
}

// Scatter: one tap per phase (k = s) and general, phase counts 1, 8 and
// mixed, phases with no taps and phases with no positions, different tap
// counts per phase, and the most taps one phase may have.
void scatter_cases(Gen& g) {
  struct Case {
    const char* why;
    Axis3 in, k, s, pf, pb, dil;
  };
  const Case cases[] = {
      {"one tap, 8 phases (k2 s2)", {2, 3, 4}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}},
      {"one tap, phases (1,2,3) (k = s per axis)", {3, 4, 5}, {1, 2, 3}, {1, 2, 3}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}},
      {"one tap, padding shifts the tap", {3, 4, 3}, {2, 2, 2}, {2, 2, 2}, {1, 0, 1}, {1, 0, 1}, {1, 1, 1}},
      {"general, k3 s2 p1: 2 taps on one phase, 1 on the other", {4, 5, 3}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {"general, k1 s2: phases with no taps", {3, 2, 5}, {1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}},
      {"general, k2 s3: a phase with no taps per axis", {4, 3, 5}, {2, 2, 2}, {3, 3, 3}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}},
      {"general, k2 d2 s2: both taps on one phase", {3, 4, 5}, {2, 2, 2}, {2, 2, 2}, {1, 0, 1}, {1, 0, 1}, {2, 2, 2}},
      {"general, stride 1 (one phase, every tap), k(2,3,1)", {3, 4, 2}, {2, 3, 1}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}, {1, 1, 1}},
  };
  for (const Case& c : cases) {
    ConvProblem p = g.make(1 + g.variant % 3, 2 + g.variant % 2, 1 + g.variant % 2, c.in, 1 + g.variant % 2);
    g.types(p, g.next_pair());
    p.kernel = c.k;
    p.stride = c.s;
    p.pad_front = c.pf;
    p.pad_back = c.pb;
    p.dilation = c.dil;
    p.bias = g.has_bias() && g.variant % 2 == 0;
    if (g.op == ConvOp::conv_transpose3d) p.pad_back = p.pad_front;
    const Plan pl = conv_plan(p);
    g.add(p, std::string(c.why) + ", phases=" + std::to_string(param(pl, "phases")));
  }
  {
    // Large side shorter than the stride on two axes: phases without positions.
    ConvProblem p = g.make(2, 3, 1, {1, 1, 3});
    g.types(p, g.next_pair());
    p.stride = {2, 3, 2};
    if (g.op == ConvOp::conv_transpose3d) p.in = {1, 1, 2}, p.kernel = {1, 1, 1}, p.output_padding = {0, 0, 1};
    g.add(p, "phases with no positions (an extent below its stride)");
  }
  // The most taps one phase may have (stride 1, one axis): the largest
  // kernel width conv_supported takes.
  std::int64_t kmax = 0;
  for (std::int64_t k = 1; k <= 1024; ++k) {
    ConvProblem p = g.make(1, 1, 1, {1, 1, 1});
    p.kernel = {1, 1, k};
    p.in = {1, 1, g.op == ConvOp::conv3d ? k : 1};
    if (!conv_supported(p)) break;
    kmax = k;
  }
  if (kmax > 1) {
    ConvProblem p = g.make(1, 2, 1, {1, 1, 1});
    g.types(p, g.next_pair());
    p.kernel = {1, 1, kmax};
    p.in = {1, 2, g.op == ConvOp::conv3d ? kmax + 1 : 2};
    g.add(p, "the most taps in one phase: " + std::to_string(kmax));
  }
}

// wgrad: every split count boundary (1, the first 2, an odd count, the most)
// of dw and of db, ragged last slices, slices crossing samples and axes, dw
// and db wider than one workgroup of the tree.
void wgrad_cases(Gen& g) {
  // A wgrad problem with `rows` small-side positions in one sample (and a
  // bias where the split count searched for is db's).
  auto with_rows = [&](std::int64_t rows, bool bias = false) {
    ConvProblem p = g.make(1, 1, 1, {1, 1, rows});
    p.bias = bias;
    return p;
  };
  auto splits_of = [&](const ConvProblem& p, const char* key) { return param(conv_plan(p), key, 1); };
  // The smallest rows whose split count `key` reaches `want` (binary
  // search: the split counts grow with the rows).
  const std::int64_t hi = std::int64_t{1} << 22;
  auto rows_for = [&](std::int64_t want, const char* key) {
    const bool db = std::string(key) == "db_splits";
    std::int64_t lo = 1, h = hi;
    if (splits_of(with_rows(h, db), key) < want) return std::int64_t{0};
    while (lo < h) {
      const std::int64_t mid = (lo + h) / 2;
      if (splits_of(with_rows(mid, db), key) >= want) h = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  // dw's split counts (with a bias on every other problem), then db's
  // (dbias has its own, shorter slices where the columns are few).
  for (const char* key : {"splits", "db_splits"}) {
    const bool db = std::string(key) == "db_splits";
    const std::int64_t most = splits_of(with_rows(hi, db), key);
    std::set<std::int64_t> counts{2, 3, most};
    for (std::int64_t want : counts) {
      const std::int64_t r = rows_for(want, key);
      if (!r) continue;
      for (std::int64_t rows : {r - 1, r, r + 1}) {
        ConvProblem p = with_rows(rows);
        g.types(p, g.next_pair());
        p.bias = db || g.variant % 2 == 0;
        const Plan pl = conv_plan(p);
        const std::int64_t s = param(pl, "splits"), slice = param(pl, "slice");
        g.add(p, "splits=" + std::to_string(s) + " (rows " + std::to_string(rows) + ", slice " + std::to_string(slice) +
                     (rows % s ? ", last slice ragged" : ", slices even") + ")" +
                     (p.bias ? ", db_splits=" + std::to_string(param(pl, "db_splits")) + " (slice " +
                                   std::to_string(param(pl, "db_slice")) + ")"
                             : ""));
      }
    }
  }
  {
    // Slices crossing samples and every axis, with taps in the padding.
    ConvProblem p = g.make(2, 3, 1, {7, 11, 29}, 3);
    g.types(p, g.next_pair());
    p.kernel = {2, 1, 3};
    p.pad_front = p.pad_back = {1, 0, 1};
    p.bias = true;
    const Plan pl = conv_plan(p);
    g.add(p, "slices crossing samples and axes, splits=" + std::to_string(param(pl, "splits")));
  }
  {
    // dw and db wider than one tree workgroup (the last ragged): 65 output
    // channels (conv3d: the small side, transpose: the large side).
    ConvProblem p = g.op == ConvOp::conv3d ? g.make(65, 13, 1, {2, 3, 3}) : g.make(5, 65, 1, {2, 3, 3});
    g.types(p, g.next_pair());
    p.bias = true;
    g.add(p, "dw and db past one tree workgroup (65 output channels)");
  }
}

// wgrad on matrix cores: the smallest small-side channels, taps x large
// channels and rows that select them and one below each, a large channel
// count that is not whole 8-channel loads (portable), then, per pair with
// an atom: 16-byte and element loads, ragged M, N and K tiles, several
// splits, groups, padding, stride and dilation, rows crossing axes shorter
// than a block step.
void wgrad_mma_cases(Gen& g) {
  for (const auto& t : g.pairs) {
    std::int64_t nmin = 0, mmin = 0, wmin = 0;
    for (std::int64_t c = 1; c <= 256 && !nmin; ++c)
      if (g.mma_at(c, 256, t)) nmin = c;
    if (!nmin) continue;  // no atom for this pair
    for (std::int64_t c = 1; c <= 256 && !mmin; ++c)
      if (g.mma_at(nmin, c, t)) mmin = c;
    for (std::int64_t w = 1; w <= 1024 && !wmin; ++w)
      if (g.mma_at(nmin, mmin, t, w)) wmin = w;
    const std::string pn = std::string(name(t.first)) + ":" + std::string(name(t.second));
    ConvProblem base = g.make(nmin, mmin, 1, {1, 1, wmin});
    g.types(base, t);
    g.add(base, "wgrad on matrix cores " + pn + ": the smallest channels and rows that select them (csg " +
                    std::to_string(nmin) + ", clg " + std::to_string(mmin) + ", rows " + std::to_string(wmin) + ")");
    ConvProblem q = base;
    q.in = {1, 1, wmin - 1};
    if (wmin > 1) g.add(q, "portable wgrad " + pn + ": one row below matrix cores");
    q = g.make(nmin - 1, mmin, 1, {1, 1, wmin});
    g.types(q, t);
    if (nmin > 1) g.add(q, "portable wgrad " + pn + ": one small channel below matrix cores");
    q = g.make(nmin, mmin - 1, 1, {1, 1, wmin});
    g.types(q, t);
    if (mmin > 1) g.add(q, "portable wgrad " + pn + ": one large channel below matrix cores");
    const Plan pl = conv_plan(base);
    const std::int64_t tm = param(pl, "tile_m"), tn = param(pl, "tile_n"), tk = param(pl, "tile_k");
    {
      // Ragged M tile (27 taps x 8), N past one tile, rows crossing axes
      // shorter than a block step, padding, bias; then clg 3 (each tap's 3
      // large channels padded to a pack of 8: element loads).
      ConvProblem p = g.make(tn + 3, 8, 1, {3, 5, 7}, 2);
      g.types(p, t);
      p.kernel = {3, 3, 3};
      p.pad_front = p.pad_back = {1, 1, 1};
      p.bias = g.has_bias();
      g.add(p, "wgrad on matrix cores " + pn + ": ragged M and N tiles, short axes, padding");
      ConvProblem q3 = g.make(tn + 3, 3, 1, {3, 5, 7}, 2);
      g.types(q3, t);
      q3.kernel = p.kernel;
      q3.pad_front = q3.pad_back = p.pad_front;
      g.add(q3, "wgrad on matrix cores " + pn + ": large channels not whole 8-channel loads (clg 3 padded to 8, 27 taps)");
    }
    {
      // Packed large loads with element small loads (csg not a multiple of
      // 8), groups 2, stride 2, dilation 2, K not whole block steps.
      ConvProblem p = g.make(nmin + 3, 16, 2, {5, 9, 2 * tk + 5}, 1);
      g.types(p, t);
      p.kernel = {1, 2, 2};
      p.stride = {2, 2, 2};
      p.dilation = {1, 2, 1};
      g.add(p, "wgrad on matrix cores " + pn + ": csg not a multiple of 8, groups 2, stride 2 on every axis, "
                   "dilation 2, a ragged last block step");
    }
    {
      // 16-byte loads on both sides, whole M and N tiles, several splits.
      ConvProblem p = g.make(tn, tm / 8, 1, {1, 1, 1});
      g.types(p, t);
      p.kernel = {1, 1, 8};
      std::int64_t w = 1;
      while (param(conv_plan(p), "splits", 1) < 3) {
        w *= 2;
        p.in = {1, 1, w + 7};
      }
      p.bias = g.has_bias();
      const Plan pq = conv_plan(p);
      g.add(p, "wgrad on matrix cores " + pn + ": 16-byte loads, whole M and N tiles, splits=" +
                   std::to_string(param(pq, "splits")));
    }
    {
      // The W-halo tile where the plan names one (asynchronous copies): the
      // fewest large channels that select it at 3x3x3 over
      // W 32. W 16: two segments per block step and a last step of one
      // segment (144 rows), two large-channel blocks, a ragged column tile,
      // padding, bias; then W taps 2 apart, groups 2, stride 2 along D and
      // two slices (2080 rows; slices of whole block steps). Where no plan
      // names the tile (registers), the same problems run tap-major.
      auto cube = [&](std::int64_t csg, std::int64_t clg, std::int64_t groups, Axis3 sp) {
        ConvProblem p = g.make(csg, clg, groups, sp, 1);
        g.types(p, t);
        p.kernel = {3, 3, 3};
        p.pad_front = p.pad_back = {1, 1, 1};
        return p;
      };
      std::int64_t hc = 0;
      for (std::int64_t c = 1; c <= 256 && !hc; ++c)
        if (param(conv_plan(cube(tn, c, 1, {3, 3, 32})), "halo_taps") > 0) hc = c;
      if (!hc) hc = tn;
      ConvProblem p = cube(tn + 8, 2 * hc, 1, {3, 3, 16});
      p.bias = g.has_bias();
      g.add(p, "wgrad on matrix cores " + pn + ": 3x3x3 over W 16 (" + halo_name(conv_plan(p)) +
                   "), a ragged column tile, padding, bias");
      // Dilation 1, 2, 3 along D, H, W: a pair's D and H offsets and the
      // staged run each use their own axis's dilation.
      ConvProblem q = cube(nmin, hc, 2, {g.op == ConvOp::conv3d ? 9 : 5, 13, 32});  // small side 5 x 13 x 32
      q.stride = {2, 1, 1};
      q.dilation = {1, 2, 3};
      q.pad_front = q.pad_back = {1, 2, 3};
      const Plan pq = conv_plan(q);
      g.add(q, "wgrad on matrix cores " + pn + ": W taps 3 apart over W 32 (" + halo_name(pq) +
                   "), dilation 1, 2, 3, groups 2, stride 2 along D, splits=" + std::to_string(param(pq, "splits")) +
                   ", slice " + std::to_string(param(pq, "slice")));
    }
  }
}

}  // namespace conv_boundary_detail

std::vector<BoundaryProblem> conv_boundary_problems(ConvOp op, ConvDir dir) {
  using namespace conv_boundary_detail;
  Gen g;
  g.op = op;
  g.dir = dir;
  const std::string first = conv_plan(g.make(1, 1, 1, {1, 1, 1})).steps.front().kernel;
  if (first.find("wgrad") != std::string::npos) g.fam = Family::wgrad;
  else if (first.find("scatter") != std::string::npos) g.fam = Family::scatter;
  instantiations(g);
  geometry_cases(g);
  tile_cases(g);
  if (g.fam != Family::wgrad) mma_cases(g);
  if (g.fam == Family::scatter) scatter_cases(g);
  if (g.fam == Family::wgrad) {
    wgrad_cases(g);
    wgrad_mma_cases(g);
  }
  return g.out;
}

std::vector<std::string> conv_unreachable_branches() {
  return {
      "grid limits (x > 2^31 - 1, y or z > 65535): declined by is_supported, checked without a run "
      "(ConvKernel.IsSupportedNamesItsReason: 70000 groups, 41^3 stride phases)",
      "more taps in one stride phase than the scatter kernel's LDS list holds: declined, checked without a run "
      "(ConvKernel.IsSupportedNamesItsReason); the largest supported count runs as a boundary problem",
      "a backward-weight split count lowered by the workspace limit: needs about 2^20 weights and 2^16 rows per "
      "sample (about 10^11 multiply-adds on the emulator); the plan rule is checked without a run "
      "(ConvKernel.WorkspaceLimitsTheSplitCount)",
      "offsets past 2^31 elements: test_conv_large (contract and wgrad)",
      "conv_contract_mma on the sm90 atom: the host emulator's default target is gfx942; "
      "KGATE_HOST_TARGET=sm90 runs the same boundary problems (ConvKernel.MatrixCoreModelsPassAndAPlantedDefectFails "
      "runs both atoms)",
  };
}

}  // namespace kgate::kernels
