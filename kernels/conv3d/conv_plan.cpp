// The typed conv plan (conv_plan.hpp): the one place the conv kernels'
// policy is decided. Compiled once per backend, like conv3d.cpp (the atom is
// the backend's).
#include "kernels/conv3d/conv_plan.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace kgate::kernels {

// A named namespace: the CUDA build compiles this file in one unit with
// conv3d.cpp and conv_boundary.cpp.
namespace conv_plan_detail {

using ref::detail::Kind;
namespace pol = conv_policy;

// The choices a plan makes over what the problem fixes; make() derives
// every other field from them. Each is "the policy's" where unset.
struct Choices {
  std::int64_t forced_splits = 0;  // conv_plan_split's count (0: none)
  // Taken from a handed plan (conv_plan_from); -1: not given.
  std::int64_t bn = -1, rgroups = -1, tap_split = -1, halo = -1;
  std::int64_t splits = -1, slice = -1, db_splits = -1, db_slice = -1;
};

int pick_bn(std::int64_t cols) {
  int bn = 1;
  while (bn < pol::kMaxBn && static_cast<std::int64_t>(bn) * cv::kTN < cols) bn *= 2;
  return bn;
}

// The split of `rows` rows of a reduction with `numel` outputs: about
// kSliceRows rows per slice, a workspace within kMaxWorkspace; with a
// forced count, whole slices of that count's length.
void pick_split(std::int64_t rows, std::int64_t numel, std::int64_t forced, std::int64_t& splits, std::int64_t& slice) {
  if (forced > 0) {
    slice = cv::ceil_div(rows, std::min(forced, std::max<std::int64_t>(rows, 1)));
    splits = std::max<std::int64_t>(1, cv::ceil_div(rows, slice));
    return;
  }
  splits = std::clamp<std::int64_t>(rows / pol::kSliceRows, 1, pol::kMaxSplits);
  while (splits > 1 && splits * numel * 4 > pol::kMaxWorkspace) --splits;
  slice = std::max<std::int64_t>(1, cv::ceil_div(rows, splits));
}

template <rt::MmaType E>
ConvAtom atom_of() {
  ConvAtom r;
  rt::mma::with_default_atom<E>([&](auto atom) {
    using Atom = decltype(atom);
    r = {true, Atom::target, Atom::M, Atom::N, Atom::K, Atom::lanes, Atom::name};
  });
  return r;
}

ConvAtom atom_for(DType src) {
  if (src == DType::bf16) return atom_of<rt::MmaType::bf16>();
  if (src == DType::fp16) return atom_of<rt::MmaType::f16>();
  return {};
}

// Every channel run of `channels` starts on a multiple of kMmaVec elements:
// 16-byte runs in a 16-byte aligned tensor.
bool runs_of_16(std::initializer_list<std::int64_t> channels) {
  bool ok = true;
  for (const std::int64_t c : channels) ok = ok && c % cv::kMmaVec == 0;
  return ok;
}

// conv_wgrad_mma's grid x: tap-major block tiles of kMmaBM GEMM rows (each
// tap's large channels padded to whole packs: cv::wgrad_apack), or the
// W-halo tile's (kd, kh) pairs x large-channel blocks.
std::int64_t wgrad_tiles_x(const cv::Geom& g, bool halo) {
  if (halo) return std::int64_t{g.K[0]} * g.K[1] * (g.clg / cv::kWgradHaloCB);
  const int av = cv::wgrad_apack(g.clg);
  return cv::ceil_div(g.taps * cv::ceil_div(g.clg, av) * av, cv::kMmaBM);
}

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw std::invalid_argument("conv plan: " + field + " " + what);
}

// conv_mma's split of K by taps (pol::kMmaSplitBlocks): each split writes
// fp32 partials and conv_tree adds them, then the bias. The tap-major step
// only (a W-halo plan's steps span a (kd, kh) pair's taps).
void mma_tap_split(ConvPlan& s, const Choices& c) {
  const cv::Geom& g = s.g;
  const bool scatter = s.dp.kind == Kind::scatter;
  const std::int64_t tiles = s.grid[0] * s.grid[1] * s.grid[2];
  const std::int64_t kdim = scatter ? g.csg : g.clg;
  const std::int64_t steps = s.max_taps * cv::ceil_div(kdim, cv::kMmaBK);
  std::int64_t run = 0;
  if (c.tap_split >= 0) {
    if (c.tap_split == 0) return;
    if (s.halo_taps > 0) bad("tap_split", "is not taken by a W-halo plan (halo_taps " + std::to_string(s.halo_taps) + ")");
    if (c.tap_split >= s.max_taps)
      bad("tap_split", "must leave at least 2 splits of the " + std::to_string(s.max_taps) + " taps, got " + std::to_string(c.tap_split));
    run = c.tap_split;
  } else {
    if (s.halo_taps > 0) return;
    std::int64_t want = c.forced_splits;
    if (want == 0) {
      if (tiles >= pol::kMmaSplitBlocks) return;
      want = std::min(cv::ceil_div(pol::kMmaSplitBlocks, tiles), steps / pol::kMmaSplitSteps);
      while (want > 1 && want * s.out_numel * 4 > pol::kMaxWorkspace) --want;
    }
    if (want < 2) return;
    run = cv::ceil_div(s.max_taps, want);
    if (cv::ceil_div(s.max_taps, run) < 2) return;
  }
  s.tap_split = run;
  s.ksplits = cv::ceil_div(s.max_taps, run);
  s.grid[2] *= s.ksplits;
  s.ktree = conv_tree_for(s.out_numel, s.ksplits);
  s.workspace_bytes = static_cast<std::uint64_t>(s.ksplits * s.out_numel * 4);
}

// conv_mma's W-halo step (cv::halo_taps), where its asynchronous copies
// run (sm_90 stages, 16-byte runs); a handed plan may decline it.
void mma_halo(ConvPlan& s, const Choices& c) {
  const bool scatter = s.dp.kind == Kind::scatter;
  const int taps = s.stages > 2 && s.wide ? cv::halo_taps(s.g, scatter) : 0;
  if (c.halo > 0 && c.halo != taps)
    bad("halo_taps", "must be " + std::to_string(taps) + " or 0 for this problem and target, got " + std::to_string(c.halo));
  s.halo_taps = c.halo == 0 ? 0 : taps;
  s.halo_seg = s.halo_taps > 0 ? cv::halo_seg(scatter ? s.g.L[2] : s.g.S[2]) : 0;
}

// A handed split of `rows` rows: slices of `slice` rows, `splits` of them,
// every row in one (the last slices may be empty: a partial of zero).
void take_split(std::int64_t rows, std::int64_t splits, std::int64_t slice, const char* splits_key, const char* slice_key,
                std::int64_t& out_splits, std::int64_t& out_slice) {
  // A slice may pass the rows by less than a block step (the W-halo tile
  // rounds its slices up to whole block steps).
  const std::int64_t most = cv::ceil_div(std::max<std::int64_t>(rows, 1), cv::kMmaBK) * cv::kMmaBK;
  if (slice < 1 || slice > most)
    bad(slice_key, "must be in [1, " + std::to_string(most) + "] rows, got " + std::to_string(slice));
  const std::int64_t least = cv::ceil_div(std::max<std::int64_t>(rows, 1), slice);
  if (splits < least || splits > std::max(least, pol::kMaxSplits))
    bad(splits_key, "must be in [" + std::to_string(least) + ", " + std::to_string(std::max(least, pol::kMaxSplits)) +
                        "] for slices of " + std::to_string(slice) + " of " + std::to_string(rows) + " rows, got " +
                        std::to_string(splits));
  out_splits = splits;
  out_slice = slice;
}

ConvPlan make(const ConvProblem& p, const Choices& c) {
  ConvPlan s;
  s.dp = ref::detail::dir_plan(p);
  const ref::detail::ConvGeom geo = ref::detail::make_geom(p);
  cv::Geom& g = s.g;
  g.n = static_cast<std::int32_t>(geo.n);
  g.groups = static_cast<std::int32_t>(geo.groups);
  g.cs = static_cast<std::int32_t>(geo.cs);
  g.cl = static_cast<std::int32_t>(geo.cl);
  g.csg = static_cast<std::int32_t>(geo.csg);
  g.clg = static_cast<std::int32_t>(geo.clg);
  for (int a = 0; a < 3; ++a) {
    g.S[a] = static_cast<std::int32_t>(geo.S[a]);
    g.L[a] = static_cast<std::int32_t>(geo.L[a]);
    g.K[a] = static_cast<std::int32_t>(geo.K[a]);
    g.stride[a] = static_cast<std::int32_t>(geo.stride[a]);
    g.pad[a] = static_cast<std::int32_t>(geo.pad[a]);
    g.dil[a] = static_cast<std::int32_t>(geo.dil[a]);
  }
  g.s_pos = geo.s_pos;
  g.l_pos = geo.l_pos;
  g.taps = geo.taps;
  auto portable_bn = [&](std::int64_t cols) {
    if (c.bn < 0) return pick_bn(cols);
    if (c.bn < 1 || c.bn > pol::kMaxBn || (c.bn & (c.bn - 1)) != 0)
      bad("bn", "must be a power of two in [1, " + std::to_string(pol::kMaxBn) + "], got " + std::to_string(c.bn));
    return static_cast<int>(c.bn);
  };
  auto mma_common = [&](bool wide) {
    s.threads = cv::mma_threads(s.atom.lanes, s.dp.kind == Kind::wgrad ? cv::kWgradWide : cv::kMmaWide);
    s.stages = cv::mma_stages(s.atom.target);
    s.wide = wide;
  };
  switch (s.dp.kind) {
    case Kind::contract: {
      s.max_taps = g.taps;
      const bool stream = g.clg >= cv::kMmaBK && runs_of_16({g.clg});
      if (g.clg >= pol::kMmaMinK && (g.csg >= pol::kMmaMinN || stream) && g.n * g.s_pos >= cv::kMmaBM) s.atom = atom_for(p.src);
      s.out_numel = g.n * g.s_pos * g.cs;
      if (s.atom.ok) {
        s.main = ConvKernel::contract_mma;
        mma_common(runs_of_16({g.clg}));
        s.wide_out = runs_of_16({g.csg});
        s.grid[0] = cv::ceil_div(g.n * g.s_pos, cv::kMmaBM);
        s.grid[1] = g.groups * cv::ceil_div(g.csg, cv::kMmaBN);
        mma_halo(s, c);
        mma_tap_split(s, c);
        break;
      }
      s.bn = portable_bn(g.csg);
      const std::int64_t bm = cv::kThreads / s.bn;
      s.grid[0] = cv::ceil_div(g.n * g.s_pos, cv::kTM * bm);
      s.grid[1] = g.groups * cv::ceil_div(g.csg, static_cast<std::int64_t>(cv::kTN) * s.bn);
      break;
    }
    case Kind::scatter: {
      std::int64_t rows = g.n;
      bool one_tap = true;
      for (int a = 0; a < 3; ++a) {
        rows *= cv::ceil_div(g.L[a], g.stride[a]);  // phase 0 has the most positions
        s.phases *= g.stride[a];
        one_tap = one_tap && g.K[a] == g.stride[a] && g.dil[a] == 1;
        // The most taps on this axis that land on one phase's lattice.
        std::int64_t most = 0;
        for (std::int64_t ph = 0; ph < g.stride[a]; ++ph) {
          std::int64_t n = 0;
          for (std::int64_t k = 0; k < g.K[a]; ++k) n += cv::pos_mod(ph + g.pad[a] - k * g.dil[a], g.stride[a]) == 0;
          most = std::max(most, n);
        }
        s.max_taps *= std::max<std::int64_t>(most, 1);
      }
      s.grid[2] = s.phases;
      if (g.csg >= pol::kMmaMinK && g.clg >= pol::kMmaMinN && rows >= cv::kMmaBM && s.max_taps <= cv::kMaxPhaseTaps)
        s.atom = atom_for(p.src);
      s.out_numel = g.n * g.l_pos * g.cl;
      if (s.atom.ok) {
        s.main = ConvKernel::scatter_mma;  // it lists the phase's taps, one or many
        mma_common(runs_of_16({g.clg, g.csg}));
        s.wide_out = runs_of_16({g.clg});
        s.grid[0] = cv::ceil_div(rows, cv::kMmaBM);
        s.grid[1] = g.groups * cv::ceil_div(g.clg, cv::kMmaBN);
        mma_halo(s, c);
        mma_tap_split(s, c);
        break;
      }
      s.main = one_tap ? ConvKernel::scatter_one_tap : ConvKernel::scatter;
      s.bn = portable_bn(g.clg);
      const std::int64_t bm = cv::kThreads / s.bn;
      s.grid[0] = cv::ceil_div(rows, cv::kTM * bm);
      s.grid[1] = g.groups * cv::ceil_div(g.clg, static_cast<std::int64_t>(cv::kTN) * s.bn);
      break;
    }
    case Kind::wgrad: {
      s.dw_numel = g.cs * g.taps * g.clg;
      s.rows = g.n * g.s_pos;
      pick_split(s.rows, s.dw_numel, c.forced_splits, s.splits, s.slice);
      if (g.csg >= pol::kMmaMinN && g.taps * g.clg >= pol::kMmaMinWgradM && s.rows >= cv::kMmaBK) s.atom = atom_for(p.src);
      if (s.atom.ok) {
        s.main = ConvKernel::wgrad_mma;
        mma_common(runs_of_16({g.clg, g.csg}));
        s.wide_small = runs_of_16({g.csg});
        s.apack = cv::wgrad_apack(g.clg);
        // The W-halo tile (cv::wgrad_halo_seg): asynchronous copies with
        // 16-byte runs, slices of whole block steps.
        const std::int32_t seg = s.stages > 2 && s.wide ? cv::wgrad_halo_seg(g) : 0;
        if (c.halo > 0 && (seg == 0 || c.halo != g.K[2]))
          bad("halo_taps", seg == 0 ? "is not available for this problem and target" : "must be " + std::to_string(g.K[2]));
        s.wgrad_halo_seg = c.halo == 0 ? 0 : seg;
        s.grid[0] = wgrad_tiles_x(g, s.wgrad_halo_seg > 0);
        s.grid[1] = g.groups * cv::ceil_div(g.csg, cv::kMmaBN);
        // At most kMmaWgradBlocks workgroups: past them, more splits only
        // add partials to write and to combine (below the cap the slice is
        // pick_split's).
        if (c.forced_splits == 0)
          s.splits = std::min(s.splits, std::max<std::int64_t>(1, pol::kMmaWgradBlocks / (s.grid[0] * s.grid[1])));
        s.slice = cv::ceil_div(s.rows, s.splits);
        if (s.wgrad_halo_seg > 0) s.slice = cv::ceil_div(s.slice, cv::kMmaBK) * cv::kMmaBK;
        s.splits = cv::ceil_div(s.rows, s.slice);
      } else {
        s.main = ConvKernel::wgrad;
        s.bn = portable_bn(g.clg);
        s.quad_large = g.clg % cv::kTN == 0;
      }
      if (c.slice >= 0) {
        take_split(s.rows, c.splits, c.slice, "splits", "slice", s.splits, s.slice);
        if (s.wgrad_halo_seg > 0 && s.slice % cv::kMmaBK != 0)
          bad("slice", "must be whole block steps of " + std::to_string(cv::kMmaBK) + " rows for the W-halo tile");
      }
      if (s.atom.ok) {
        s.grid[2] = s.splits;
      } else {
        const std::int64_t bm = cv::kThreads / s.bn;
        // The row groups one split needs (a power of two up to bm); the
        // workgroup's others take the next splits (the head's 6 small
        // channels fill 2 of 4: a workgroup holds 2 splits, not half idle).
        if (c.rgroups >= 0) {
          if (c.rgroups < 1 || c.rgroups > bm || (c.rgroups & (c.rgroups - 1)) != 0)
            bad("rgroups", "must be a power of two in [1, " + std::to_string(bm) + "], got " + std::to_string(c.rgroups));
          s.rgroups = static_cast<int>(c.rgroups);
        } else {
          while (s.rgroups < bm && s.rgroups * cv::kTM < g.csg) s.rgroups *= 2;
        }
        s.grid[0] = g.taps * cv::ceil_div(g.clg, static_cast<std::int64_t>(cv::kTN) * s.bn);
        s.grid[1] = g.groups * cv::ceil_div(g.csg, cv::kTM * s.rgroups);
        s.grid[2] = cv::ceil_div(s.splits, bm / s.rgroups);
      }
      s.tree = conv_tree_for(s.dw_numel, s.splits);
      s.workspace_bytes = static_cast<std::uint64_t>(s.splits * s.dw_numel * 4);
      if (s.dp.db) {
        s.db_rows = g.n * (s.dp.dy_is_small ? g.s_pos : g.l_pos);
        pick_split(s.db_rows, p.cout, c.forced_splits, s.db_splits, s.db_slice);
        // Few columns (the head's 6): shorter slices, so that the column
        // sums have about kColsumItems work-items (one per column and slice).
        if (c.forced_splits == 0 && p.cout * s.db_splits < pol::kColsumItems) {
          const std::int64_t more =
              std::min({cv::ceil_div(pol::kColsumItems, p.cout), s.db_rows / pol::kMinColsumSlice, pol::kMaxSplits});
          if (more > s.db_splits) {
            s.db_splits = more;
            s.db_slice = cv::ceil_div(s.db_rows, more);
          }
        }
        if (c.db_slice >= 0) take_split(s.db_rows, c.db_splits, c.db_slice, "db_splits", "db_slice", s.db_splits, s.db_slice);
        s.db_tree = conv_tree_for(p.cout, s.db_splits);
        s.colsum_workgroups = cv::ceil_div(p.cout * s.db_splits, cv::kThreads);
        s.workspace_bytes += static_cast<std::uint64_t>(s.db_splits * p.cout * 4);
      }
      break;
    }
  }
  if (s.atom.ok && s.dp.kind != Kind::wgrad) s.lds_bytes = cv::mma_dynamic_lds_bytes(s.atom.target);  // wgrad: static LDS
  return s;
}

std::array<std::uint32_t, 3> grid3(std::int64_t x, std::int64_t y, std::int64_t z) {
  return {static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), static_cast<std::uint32_t>(z)};
}

// The matrix-core reduction of one output: one chain of atom instructions
// over taps x channels, the channels of each tap padded to whole atoms
// (conv_mma); cdna3 rounds per 8-product group, sm_90 per instruction.
ReductionPlan mma_reduction(const ConvAtom& atom, std::int64_t taps, std::int64_t channels) {
  ReductionPlan r = ReductionPlan::sequential(taps * cv::ceil_div(channels, atom.k) * atom.k);
  r.model = atom.target == rt::Target::sm90 ? AccumModel::mma_sm90 : AccumModel::mfma_cdna3;
  r.chunk = atom.target == rt::Target::sm90 ? atom.k : 8;
  return r;
}

LaunchStep tree_step(const ConvTree& t) {
  return {kernel_name(t.by_split ? ConvKernel::tree_split : ConvKernel::tree), grid3(t.workgroups, 1, 1),
          {cv::kThreads, 1, 1}, 0};
}

// The first field in which two generic plans differ, in words.
std::string first_difference(const Plan& want, const Plan& got) {
  if (want.op != got.op) return "op is " + got.op + ", the problem's is " + want.op;
  if (want.variant != got.variant) return "variant is " + got.variant + ", its choices give " + want.variant;
  for (const auto& [k, v] : want.params) {
    const auto it = got.params.find(k);
    if (it == got.params.end()) return "params." + k + " is missing (its choices give " + std::to_string(v) + ")";
    if (it->second != v) return "params." + k + " is " + std::to_string(it->second) + ", its choices give " + std::to_string(v);
  }
  for (const auto& [k, v] : got.params)
    if (!want.params.count(k)) return "params." + k + " is not a parameter of this plan";
  if (want.steps.size() != got.steps.size())
    return "steps: " + std::to_string(got.steps.size()) + ", its choices give " + std::to_string(want.steps.size());
  for (std::size_t i = 0; i < want.steps.size(); ++i)
    if (!(want.steps[i] == got.steps[i])) return "steps[" + std::to_string(i) + "] (" + got.steps[i].kernel + ") is not what its choices give";
  if (want.reduction != got.reduction) return "reduction is not what its choices give";
  if (want.workspace_bytes != got.workspace_bytes)
    return "workspace_bytes is " + std::to_string(got.workspace_bytes) + ", its choices give " + std::to_string(want.workspace_bytes);
  return "differs";
}

}  // namespace conv_plan_detail

using namespace conv_plan_detail;

const char* kernel_name(ConvKernel k) {
  switch (k) {
    case ConvKernel::contract: return "conv_contract";
    case ConvKernel::contract_mma: return "conv_contract_mma";
    case ConvKernel::scatter: return "conv_scatter";
    case ConvKernel::scatter_one_tap: return "conv_scatter_one_tap";
    case ConvKernel::scatter_mma: return "conv_scatter_mma";
    case ConvKernel::wgrad: return "conv_wgrad";
    case ConvKernel::wgrad_mma: return "conv_wgrad_mma";
    case ConvKernel::tree: return "conv_tree";
    case ConvKernel::tree_split: return "conv_tree_split";
    case ConvKernel::colsum: return "conv_colsum";
  }
  return "?";
}

ConvTree conv_tree_for(std::int64_t numel, std::int64_t splits) {
  ConvTree t;
  t.numel = numel;
  t.splits = splits;
  t.by_split = splits >= pol::kTreeSplitMinSplits && numel <= pol::kTreeSplitMaxNumel;
  const std::int64_t r = numel / (std::int64_t{cv::kThreads} * pol::kTreeWideGroups);
  t.runs = static_cast<int>(std::clamp<std::int64_t>(r, 1, pol::kTreeMaxRuns));
  t.workgroups = t.by_split ? numel : cv::ceil_div(numel, std::int64_t{cv::kThreads} * t.runs);
  return t;
}

ConvPlan conv_plan_for(const ConvProblem& p) { return make(p, {}); }

std::string conv_plan_limits(const ConvPlan& cp) {
  const char* axis[3] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    const std::int64_t lim = a == 0 ? pol::kMaxGridX : pol::kMaxGridYZ;
    if (cp.grid[a] > lim)
      return std::string(kernel_name(cp.main)) + " grid " + axis[a] + " = " + std::to_string(cp.grid[a]) + " exceeds " +
             std::to_string(lim);
  }
  if (cp.main == ConvKernel::scatter && cp.max_taps > cv::kMaxPhaseTaps)
    return "up to " + std::to_string(cp.max_taps) + " taps in one stride phase exceeds " + std::to_string(cv::kMaxPhaseTaps);
  return "";
}

ConvPlan conv_plan_split(const ConvProblem& p, std::int64_t splits) {
  if (splits < 1) throw std::invalid_argument("conv_plan_split: the split count must be at least 1");
  Choices c;
  c.forced_splits = splits;
  return make(p, c);
}

Plan to_plan(const ConvProblem& p, const ConvPlan& s) {
  const cv::Geom& g = s.g;
  Plan pl;
  pl.op = std::string(name(p.op)) + "." + std::string(name(p.dir));
  const std::array<std::uint32_t, 3> block{static_cast<std::uint32_t>(s.threads), 1, 1};
  const char* main = kernel_name(s.main);
  if (s.atom.ok) {
    pl.variant = std::string("mma-igemm/") + s.atom.name + "/" +
                 std::to_string(s.wgrad_halo_seg > 0 ? cv::kWgradHaloM : cv::kMmaBM) + "x" + std::to_string(cv::kMmaBN) +
                 "x" + std::to_string(cv::kMmaBK);
    pl.params = {{"threads", s.threads}, {"tile_m", cv::kMmaBM}, {"tile_n", cv::kMmaBN},
                 {"tile_k", cv::kMmaBK}, {"atom_k", s.atom.k},   {"stages", s.stages},
                 {"wide", s.wide}};
    // conv_mma's W-halo step: its taps per step, 0 where the plan takes
    // tap-major steps; present where the asynchronous copies run.
    if (s.dp.kind != Kind::wgrad) {
      pl.params["wide_out"] = s.wide_out;
      if (s.stages > 2 && s.wide) pl.params["halo_taps"] = s.halo_taps;
    } else {
      pl.params["wide_small"] = s.wide_small;
      pl.params["apack"] = s.apack;
    }
  } else {
    pl.variant = std::string("portable-igemm/") + main + "/t" + std::to_string(cv::kTM) + "x" + std::to_string(cv::kTN);
    pl.params = {{"threads", cv::kThreads}, {"tile_m", cv::kTM}, {"tile_n", cv::kTN}, {"bn", s.bn},
                 {"bm", cv::kThreads / s.bn}};
    if (s.dp.kind == Kind::wgrad) pl.params["quad_large"] = s.quad_large;
  }
  pl.steps.push_back({main, grid3(s.grid[0], s.grid[1], s.grid[2]), block, s.lds_bytes});
  const std::string out = std::string(name(s.dp.out));
  // Contract and scatter: each output sums `taps` taps of `channels`
  // channels, on the atom's chain or in sequence, then the bias. With
  // conv_mma's split of K: each split's chain over its run of taps, then
  // the tree over the splits (conv_tree, which adds the bias).
  auto gemm_reduction = [&](std::int64_t taps, std::int64_t channels) {
    ReductionPlan r = s.atom.ok ? mma_reduction(s.atom, s.ksplits > 1 ? std::min(taps, s.tap_split) : taps, channels)
                                : ReductionPlan::sequential(taps * channels);
    r.epilogue_ops = s.dp.bias_on_out ? 1 : 0;
    if (s.ksplits > 1) {
      r.splits = s.ksplits;
      r.combine = PartialCombine::tree;
      r.split_run = s.tap_split;
      pl.params["tap_split"] = s.tap_split;
      pl.params["splits"] = s.ksplits;
      pl.params["tree_runs"] = s.ktree.runs;
      pl.steps.push_back(tree_step(s.ktree));
    }
    return r;
  };
  switch (s.dp.kind) {
    case Kind::contract: pl.reduction[out] = gemm_reduction(g.taps, g.clg); break;
    case Kind::scatter: {
      pl.params["phases"] = s.phases;
      pl.params["one_tap"] = s.main == ConvKernel::scatter_one_tap;
      pl.reduction[out] = gemm_reduction(s.max_taps, g.csg);
      break;
    }
    case Kind::wgrad: {
      if (s.wgrad_halo_seg > 0) {
        pl.params["halo_taps"] = s.g.K[2];
        pl.params["tile_m"] = cv::kWgradHaloM;
      }
      pl.params["splits"] = s.splits;
      pl.params["slice"] = s.slice;
      if (!s.atom.ok) pl.params["rgroups"] = s.rgroups;
      pl.params["tree_runs"] = s.tree.runs;
      pl.steps.push_back(tree_step(s.tree));
      // Each slice: one atom chain over its rows (conv_wgrad_mma) or a
      // sequential loop (conv_wgrad); then the tree over the slices.
      ReductionPlan r = s.atom.ok ? mma_reduction(s.atom, 1, s.slice) : ReductionPlan::sequential(s.slice);
      r.splits = s.splits;
      r.combine = PartialCombine::tree;
      if (s.splits > 1) r.split_run = s.slice;
      pl.reduction[out] = r;
      if (s.dp.db) {
        pl.params["db_splits"] = s.db_splits;
        pl.params["db_slice"] = s.db_slice;
        pl.steps.push_back({kernel_name(ConvKernel::colsum), grid3(s.colsum_workgroups, 1, 1), {cv::kThreads, 1, 1}, 0});
        pl.steps.push_back(tree_step(s.db_tree));
        ReductionPlan d;
        d.length = s.db_slice;
        d.splits = s.db_splits;
        d.combine = PartialCombine::tree;
        if (s.db_splits > 1) d.split_run = s.db_slice;
        pl.reduction["db"] = d;
      }
      break;
    }
  }
  pl.workspace_bytes = s.workspace_bytes;
  return pl;
}

namespace conv_plan_detail {

// The choices `plan` makes for p (its params), each checked by make().
ConvPlan with_choices(const ConvProblem& p, const Plan& plan) {
  const auto get = [&](const char* key) -> std::int64_t {
    const auto it = plan.params.find(key);
    return it == plan.params.end() ? -1 : it->second;
  };
  Choices c;
  const ConvPlan own = make(p, {});
  if (own.atom.ok) {
    c.halo = get("halo_taps");
    if (own.dp.kind != Kind::wgrad) c.tap_split = std::max<std::int64_t>(get("tap_split"), 0);
  } else {
    c.bn = get("bn");
    if (c.bn < 0) bad("params.bn", "is missing");
    if (own.dp.kind == Kind::wgrad) c.rgroups = get("rgroups");
  }
  if (own.dp.kind == Kind::wgrad) {
    c.slice = get("slice");
    c.splits = get("splits");
    if (c.slice < 0) bad("params.slice", "is missing");
    if (c.splits < 0) bad("params.splits", "is missing");
    if (own.dp.db) {
      c.db_slice = get("db_slice");
      c.db_splits = get("db_splits");
      if (c.db_slice < 0) bad("params.db_slice", "is missing");
      if (c.db_splits < 0) bad("params.db_splits", "is missing");
    }
    if (c.halo < 0) c.halo = 0;
  }
  const ConvPlan cp = make(p, c);
  if (const std::string why = conv_plan_limits(cp); !why.empty()) bad("for " + plan.op, "cannot run: " + why);
  return cp;
}

}  // namespace conv_plan_detail

Plan complete_conv_plan(const ConvProblem& p, const Plan& plan) { return to_plan(p, with_choices(p, plan)); }

ConvPlan conv_plan_from(const ConvProblem& p, const Plan& plan) {
  const ConvPlan cp = with_choices(p, plan);
  const Plan want = to_plan(p, cp);
  if (!(want == plan)) bad("for " + want.op, first_difference(want, plan));
  return cp;
}

cv::GemmArgs gemm_args(const ConvPlan& cp) {
  cv::GemmArgs a{};
  a.g = cp.g;
  a.bn = cp.bn;
  a.wide = cp.wide;
  a.wide_out = cp.wide_out;
  a.halo_taps = cp.halo_taps;
  a.halo_seg = cp.halo_seg;
  if (cp.ksplits > 1) {
    a.tap_split = static_cast<std::int32_t>(cp.tap_split);
    a.splits = static_cast<std::int32_t>(cp.ksplits);
    a.ws_numel = cp.out_numel;
  }
  return a;
}

cv::WgradArgs wgrad_args(const ConvPlan& cp) {
  cv::WgradArgs a{};
  a.g = cp.g;
  a.bn = cp.bn;
  a.slice = cp.slice;
  a.wide = cp.wide;
  a.wide_small = cp.wide_small;
  a.halo_seg = cp.wgrad_halo_seg;
  a.quad_large = cp.quad_large;
  a.rgroups = cp.rgroups;
  a.splits = cp.splits;
  return a;
}

cv::TreeArgs tree_args(const ConvTree& t) {
  cv::TreeArgs a{};
  a.numel = t.numel;
  a.splits = t.splits;
  a.runs = t.runs;
  return a;
}

void conv_check_alignment(const void* ptr, const char* what, std::size_t bytes) {
  if (reinterpret_cast<std::uintptr_t>(ptr) % bytes != 0)
    throw std::invalid_argument(std::string("conv: ") + what + " is not " + std::to_string(bytes) +
                                "-byte aligned, which the plan's accesses of it need");
}

}  // namespace kgate::kernels
