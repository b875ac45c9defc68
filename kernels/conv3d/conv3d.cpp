// conv3d / conv_transpose3d: plans and the host driver over conv_kernels.hpp.
// Compiled once per backend (the runtime picks it from the compiler).
//
// Every plan quantity is a function of the problem alone: the kernel family
// (from the direction's kind in reference/conv3d/conv_geometry.hpp), the
// work-items along N, the grid, the split count of backward-weight and
// dbias, and the reduction structure the oracle bounds the error with.
#include "kernels/conv3d/conv3d.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <stdexcept>

#include "kernels/conv3d/conv_kernels.hpp"
#include "kernels/driver.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/conv3d/conv_geometry.hpp"

namespace kgate::kernels {

namespace {

using ref::detail::Kind;

// Split-K of backward-weight and dbias: about kSliceRows rows per slice, at
// most kMaxSplits slices, and a workspace of at most kMaxWorkspace bytes.
// The splits are what spreads a weight gradient with few output tiles (a
// 1x1x1 head, a first layer of 3 channels) over the device, so their cap is
// high; the tree over them is ceil(log2 splits) deep.
constexpr std::int64_t kSliceRows = 1024;
constexpr std::int64_t kMaxSplits = 4096;
constexpr std::int64_t kMaxWorkspace = std::int64_t{256} << 20;
// dbias: the column sums' work-items to aim for and their shortest slice.
constexpr std::int64_t kColsumItems = 65536, kMinColsumSlice = 256;
// Work-items along N at most (so that a workgroup spans >= 4 tile rows).
constexpr int kMaxBn = 16;
constexpr std::int64_t kMaxGridX = 0x7fffffff, kMaxGridYZ = 65535;

// The MMA atom this backend runs for an input dtype (HIP: gfx942, CUDA:
// sm90, host: its configured target), as data.
struct AtomInfo {
  bool ok = false;
  rt::Target target = rt::Target::gfx942;
  int m = 0, n = 0, k = 0, lanes = 0;
  const char* name = "";
};

// The contract and scatter families run on matrix cores (conv_mma) for
// bf16 / fp16 when the channels per tap are at least 3 (an RGB input: the
// U-Net's first layer, where even 3 of an atom's 16 K lanes beat the
// portable kernel on the GPU), the output channels per group a quarter of
// the block tile's N and the GEMM rows (of the largest stride phase) one
// block tile. Below that most of each instruction is padding, which costs
// the host emulator (every atom through its numeric model) more than the
// portable kernel. The contract family also takes fewer output channels
// where its source's channels per group are whole 16-byte runs of at least
// a block step (the U-Net's 1x1x1 head: 6 output channels over 64): its
// time is then the stream of its source, which conv_mma reads in 16-byte
// copies and the portable kernel element by element.
constexpr std::int64_t kMmaMinK = 3, kMmaMinN = 16;
// Backward-weight runs on matrix cores (conv_wgrad_mma) for bf16 / fp16
// when the small channels per group fill a quarter of the block tile's N,
// the taps x large channels a quarter of its M and the rows one block step
// (each tap's large channels padded to whole packs on the M side:
// cv::wgrad_apack).
constexpr std::int64_t kMmaMinWgradM = cv::kMmaBM / 4;

struct Shape {
  ref::detail::DirPlan dp;
  AtomInfo atom;  // ok: the main kernel is conv_mma
  cv::Geom g{};
  int bn = 1;
  std::int64_t phases = 1;
  bool one_tap = false;
  std::int64_t main_grid[3] = {1, 1, 1};
  std::int64_t rows = 0, splits = 1, slice = 1;           // wgrad: K rows and its split
  std::int64_t db_rows = 0, db_splits = 1, db_slice = 1;  // dbias
  std::int64_t dw_numel = 0;
  std::int64_t max_taps = 1;  // taps that can contribute to one output element
  bool wgrad_halo = false;    // conv_wgrad_mma runs its W-halo tile
  int rgroups = 1;            // conv_wgrad: row groups per split (WgradArgs::rgroups)
  std::int64_t tap_split = 0, ksplits = 1;  // conv_mma's split of K by taps (mma_tap_split)
  std::int64_t out_numel = 0;               // contract / scatter: output elements
};

int pick_bn(std::int64_t cols) {
  int bn = 1;
  while (bn < kMaxBn && static_cast<std::int64_t>(bn) * cv::kTN < cols) bn *= 2;
  return bn;
}

// ForcedSplits' count on this thread (0: the plan's own choice).
thread_local std::int64_t t_forced_splits = 0;

void pick_split(std::int64_t rows, std::int64_t numel, std::int64_t& splits, std::int64_t& slice) {
  if (t_forced_splits > 0) {
    // Whole slices only: the count actually planned is the slices of the
    // forced count's length.
    slice = cv::ceil_div(rows, std::min(t_forced_splits, std::max<std::int64_t>(rows, 1)));
    splits = std::max<std::int64_t>(1, cv::ceil_div(rows, slice));
    return;
  }
  splits = std::clamp<std::int64_t>(rows / kSliceRows, 1, kMaxSplits);
  while (splits > 1 && splits * numel * 4 > kMaxWorkspace) --splits;
  slice = std::max<std::int64_t>(1, cv::ceil_div(rows, splits));
}

template <rt::MmaType E>
AtomInfo atom_of() {
  AtomInfo r;
  rt::mma::with_default_atom<E>([&](auto atom) {
    using Atom = decltype(atom);
    r = {true, Atom::target, Atom::M, Atom::N, Atom::K, Atom::lanes, Atom::name};
  });
  return r;
}

AtomInfo atom_for(DType src) {
  if (src == DType::bf16) return atom_of<rt::MmaType::bf16>();
  if (src == DType::fp16) return atom_of<rt::MmaType::f16>();
  return {};
}

bool wide_runs(std::initializer_list<std::int64_t> channels, std::initializer_list<const void*> tensors);
bool wide_loads(const Shape& s, std::initializer_list<const void*> tensors);

// Whether conv_mma's plan may take the W-halo step: sm_90's asynchronous
// copies with 16-byte runs (the driver's tensors are 16-byte aligned).
bool mma_async(const Shape& s) {
  return s.dp.kind != Kind::wgrad && cv::mma_stages(s.atom.target) > 2 && wide_loads(s, {});
}
// Whether it takes it: cv::halo_taps serves the geometry.
bool mma_halo(const Shape& s) { return mma_async(s) && cv::halo_taps(s.g, s.dp.kind == Kind::scatter) > 0; }

// conv_mma's split of K by taps, for layers of few block tiles and a long K
// (the U-Net's deepest layers: 8^3 positions and 512-1024 channels have 32
// to 64 tiles, each walking 27 taps, fewer than a GPU has multiprocessors;
// the plan reads no device property, so the threshold is a constant): the
// taps (of a phase) in runs of tap_split, so that the tiles x splits approach
// kMmaSplitBlocks and every split keeps at least kMmaSplitSteps block steps;
// each split writes fp32 partials and conv_tree adds them, then the bias.
// The tap-major step only (a W-halo plan's steps span a (kd, kh) pair's
// taps).
constexpr std::int64_t kMmaSplitBlocks = 256, kMmaSplitSteps = 64;
void mma_tap_split(Shape& s) {
  const cv::Geom& g = s.g;
  const bool scatter = s.dp.kind == Kind::scatter;
  const std::int64_t tiles = s.main_grid[0] * s.main_grid[1] * s.main_grid[2];
  const std::int64_t kdim = scatter ? g.csg : g.clg;
  const std::int64_t steps = s.max_taps * cv::ceil_div(kdim, cv::kMmaBK);
  if (mma_halo(s)) return;
  std::int64_t want = t_forced_splits;
  if (want == 0) {
    if (tiles >= kMmaSplitBlocks) return;
    want = std::min(cv::ceil_div(kMmaSplitBlocks, tiles), steps / kMmaSplitSteps);
    while (want > 1 && want * s.out_numel * 4 > kMaxWorkspace) --want;
  }
  if (want < 2) return;
  const std::int64_t run = cv::ceil_div(s.max_taps, want);
  if (cv::ceil_div(s.max_taps, run) < 2) return;
  s.tap_split = run;
  s.ksplits = cv::ceil_div(s.max_taps, run);
  s.main_grid[2] *= s.ksplits;
}

// conv_wgrad_mma's grid x: tap-major block tiles of kMmaBM GEMM rows (each
// tap's large channels padded to whole packs: cv::wgrad_apack), or the
// W-halo tile's (kd, kh) pairs x large-channel blocks.
std::int64_t wgrad_tiles_x(const cv::Geom& g, bool halo) {
  if (halo) return std::int64_t{g.K[0]} * g.K[1] * (g.clg / cv::kWgradHaloCB);
  const int av = cv::wgrad_apack(g.clg);
  return cv::ceil_div(g.taps * cv::ceil_div(g.clg, av) * av, cv::kMmaBM);
}

Shape shape_of(const ConvProblem& p) {
  Shape s;
  s.dp = ref::detail::dir_plan(p);
  const ref::detail::ConvGeom c = ref::detail::make_geom(p);
  cv::Geom& g = s.g;
  g.n = c.n;
  g.groups = c.groups;
  g.cs = c.cs;
  g.cl = c.cl;
  g.csg = c.csg;
  g.clg = c.clg;
  for (int a = 0; a < 3; ++a) {
    g.S[a] = c.S[a];
    g.L[a] = c.L[a];
    g.K[a] = c.K[a];
    g.stride[a] = c.stride[a];
    g.pad[a] = c.pad[a];
    g.dil[a] = c.dil[a];
  }
  g.s_pos = c.s_pos;
  g.l_pos = c.l_pos;
  g.taps = c.taps;
  switch (s.dp.kind) {
    case Kind::contract: {
      s.max_taps = g.taps;
      const bool stream = g.clg >= cv::kMmaBK && wide_runs({g.clg}, {});
      if (g.clg >= kMmaMinK && (g.csg >= kMmaMinN || stream) && g.n * g.s_pos >= cv::kMmaBM) s.atom = atom_for(p.src);
      s.out_numel = g.n * g.s_pos * g.cs;
      if (s.atom.ok) {
        s.main_grid[0] = cv::ceil_div(g.n * g.s_pos, cv::kMmaBM);
        s.main_grid[1] = g.groups * cv::ceil_div(g.csg, cv::kMmaBN);
        mma_tap_split(s);
        break;
      }
      s.bn = pick_bn(g.csg);
      const std::int64_t bm = cv::kThreads / s.bn;
      s.main_grid[0] = cv::ceil_div(g.n * g.s_pos, cv::kTM * bm);
      s.main_grid[1] = g.groups * cv::ceil_div(g.csg, static_cast<std::int64_t>(cv::kTN) * s.bn);
      break;
    }
    case Kind::scatter: {
      s.bn = pick_bn(g.clg);
      const std::int64_t bm = cv::kThreads / s.bn;
      std::int64_t rows = g.n;
      s.max_taps = 1;
      s.one_tap = true;
      for (int a = 0; a < 3; ++a) {
        rows *= cv::ceil_div(g.L[a], g.stride[a]);  // phase 0 has the most positions
        s.phases *= g.stride[a];
        s.one_tap = s.one_tap && g.K[a] == g.stride[a] && g.dil[a] == 1;
        // The most taps on this axis that land on one phase's lattice.
        std::int64_t most = 0;
        for (std::int64_t ph = 0; ph < g.stride[a]; ++ph) {
          std::int64_t n = 0;
          for (std::int64_t k = 0; k < g.K[a]; ++k) n += cv::pos_mod(ph + g.pad[a] - k * g.dil[a], g.stride[a]) == 0;
          most = std::max(most, n);
        }
        s.max_taps *= std::max<std::int64_t>(most, 1);
      }
      s.main_grid[2] = s.phases;
      if (g.csg >= kMmaMinK && g.clg >= kMmaMinN && rows >= cv::kMmaBM && s.max_taps <= cv::kMaxPhaseTaps)
        s.atom = atom_for(p.src);
      s.out_numel = g.n * g.l_pos * g.cl;
      if (s.atom.ok) {
        s.one_tap = false;  // conv_mma lists the phase's taps, one or many
        s.main_grid[0] = cv::ceil_div(rows, cv::kMmaBM);
        s.main_grid[1] = g.groups * cv::ceil_div(g.clg, cv::kMmaBN);
        mma_tap_split(s);
        break;
      }
      s.main_grid[0] = cv::ceil_div(rows, cv::kTM * bm);
      s.main_grid[1] = g.groups * cv::ceil_div(g.clg, static_cast<std::int64_t>(cv::kTN) * s.bn);
      break;
    }
    case Kind::wgrad: {
      s.bn = pick_bn(g.clg);
      const std::int64_t bm = cv::kThreads / s.bn;
      s.dw_numel = g.cs * g.taps * g.clg;
      s.rows = g.n * g.s_pos;
      pick_split(s.rows, s.dw_numel, s.splits, s.slice);
      s.main_grid[2] = s.splits;
      if (g.csg >= kMmaMinN && g.taps * g.clg >= kMmaMinWgradM && s.rows >= cv::kMmaBK) s.atom = atom_for(p.src);
      if (s.atom.ok) {
        // The W-halo tile (cv::wgrad_halo_seg): asynchronous copies with
        // 16-byte runs, slices of whole block steps.
        s.wgrad_halo = cv::mma_stages(s.atom.target) > 2 && wide_runs({g.clg, g.csg}, {}) && cv::wgrad_halo_seg(g) > 0;
        s.main_grid[0] = wgrad_tiles_x(g, s.wgrad_halo);
        s.main_grid[1] = g.groups * cv::ceil_div(g.csg, cv::kMmaBN);
        // At most cv::kMmaWgradBlocks workgroups: past them, more splits
        // only add partials to write and to combine. (Below the cap the
        // slice is pick_split's.)
        if (t_forced_splits == 0)
          s.splits = std::min(s.splits, std::max<std::int64_t>(1, cv::kMmaWgradBlocks / (s.main_grid[0] * s.main_grid[1])));
        s.slice = cv::ceil_div(s.rows, s.splits);
        if (s.wgrad_halo) s.slice = cv::ceil_div(s.slice, cv::kMmaBK) * cv::kMmaBK;
        s.splits = cv::ceil_div(s.rows, s.slice);
        s.main_grid[2] = s.splits;
      } else {
        // The row groups one split needs (a power of two up to bm); the
        // workgroup's others take the next splits (the head's 6 small
        // channels fill 2 of 4: a workgroup holds 2 splits, not half idle).
        while (s.rgroups < bm && s.rgroups * cv::kTM < g.csg) s.rgroups *= 2;
        s.main_grid[0] = g.taps * cv::ceil_div(g.clg, static_cast<std::int64_t>(cv::kTN) * s.bn);
        s.main_grid[1] = g.groups * cv::ceil_div(g.csg, cv::kTM * s.rgroups);
        s.main_grid[2] = cv::ceil_div(s.splits, bm / s.rgroups);
      }
      if (s.dp.db) {
        s.db_rows = g.n * (s.dp.dy_is_small ? g.s_pos : g.l_pos);
        pick_split(s.db_rows, p.cout, s.db_splits, s.db_slice);
        // Few columns (the head's 6): shorter slices, so that the column
        // sums have about kColsumItems work-items (one per column and slice).
        if (t_forced_splits == 0 && p.cout * s.db_splits < kColsumItems) {
          const std::int64_t more = std::min({cv::ceil_div(kColsumItems, p.cout), s.db_rows / kMinColsumSlice, kMaxSplits});
          if (more > s.db_splits) {
            s.db_splits = more;
            s.db_slice = cv::ceil_div(s.db_rows, more);
          }
        }
      }
      break;
    }
  }
  return s;
}

std::array<std::uint32_t, 3> grid3(std::int64_t x, std::int64_t y, std::int64_t z) {
  return {static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), static_cast<std::uint32_t>(z)};
}

const char* main_kernel(const Shape& s) {
  switch (s.dp.kind) {
    case Kind::contract: return s.atom.ok ? "conv_contract_mma" : "conv_contract";
    case Kind::scatter: return s.atom.ok ? "conv_scatter_mma" : s.one_tap ? "conv_scatter_one_tap" : "conv_scatter";
    case Kind::wgrad: return s.atom.ok ? "conv_wgrad_mma" : "conv_wgrad";
  }
  return "?";
}

// f.template operator()<Tin, Tout>() for the problem's dtypes.
template <class F>
void with_conv_types(DType src, DType dst, F&& f) {
  auto by_out = [&](auto tin) {
    using Tin = decltype(tin);
    if (dst == DType::fp32) f.template operator()<Tin, float>();
    else f.template operator()<Tin, Tin>();
  };
  switch (src) {
    case DType::bf16: return by_out(kgate::bf16{});
    case DType::fp16: return by_out(kgate::fp16{});
    default: return by_out(float{});
  }
}

// The matrix-core reduction of one output: one chain of atom instructions
// over taps x channels, the channels of each tap padded to whole atoms
// (conv_mma); cdna3 rounds per 8-product group, sm_90 per instruction.
ReductionPlan mma_reduction(const AtomInfo& atom, std::int64_t taps, std::int64_t channels) {
  ReductionPlan r = ReductionPlan::sequential(taps * cv::ceil_div(channels, atom.k) * atom.k);
  r.model = atom.target == rt::Target::sm90 ? AccumModel::mma_sm90 : AccumModel::mfma_cdna3;
  r.chunk = atom.target == rt::Target::sm90 ? atom.k : 8;
  return r;
}

rt::LaunchConfig conv_config(std::int64_t x, std::int64_t y = 1, std::int64_t z = 1) {
  rt::LaunchConfig c;
  c.grid = rt::dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z));
  c.block = rt::dim3(cv::kThreads);
  return c;
}

// The matrix-core kernels' 16-byte accesses: every channel run they touch
// starts on a multiple of 8 elements (each of `channels` a multiple of 8) of
// a 16-byte aligned tensor.
bool wide_runs(std::initializer_list<std::int64_t> channels, std::initializer_list<const void*> tensors) {
  bool ok = true;
  for (const std::int64_t c : channels) ok = ok && c % cv::kMmaVec == 0;
  for (const void* t : tensors) ok = ok && reinterpret_cast<std::uintptr_t>(t) % 16 == 0;
  return ok;
}
// The runs the main kernel loads: conv_mma's contract family runs of clg
// channels (the source's and each weight row's), its scatter family csg
// (the source's) and clg (the weight rows'); conv_wgrad_mma both operands'.
bool wide_loads(const Shape& s, std::initializer_list<const void*> tensors) {
  if (s.dp.kind == Kind::contract) return wide_runs({s.g.clg}, tensors);
  return wide_runs({s.g.clg, s.g.csg}, tensors);
}
// The runs conv_mma's epilogue stores: the output's channels per group.
bool wide_stores(const Shape& s, const void* out) {
  return wide_runs({s.dp.kind == Kind::contract ? s.g.csg : s.g.clg}, {out});
}

// f(atom) with the backend's default atom for Tin (bf16 / fp16 only), and
// the matrix-core kernels' launch configuration.
template <class Tin, class F>
void with_mma_atom(F&& f) {
  if constexpr (!std::is_same_v<Tin, float>) {
    constexpr auto type = std::is_same_v<Tin, kgate::bf16> ? rt::MmaType::bf16 : rt::MmaType::f16;
    rt::mma::with_default_atom<type>(f);
  } else {
    throw std::logic_error("conv: no matrix-core path for fp32 inputs");
  }
}

// Work-items of the matrix-core kernel of `s` (conv_mma's wide wave tile or
// conv_wgrad_mma's).
int mma_threads(const Shape& s) {
  return cv::mma_threads(s.atom.lanes, s.dp.kind == Kind::wgrad ? cv::kWgradWide : cv::kMmaWide);
}

rt::LaunchConfig mma_config(const Shape& s, std::size_t lds_bytes = 0) {
  rt::LaunchConfig c = conv_config(s.main_grid[0], s.main_grid[1], s.main_grid[2]);
  c.block = rt::dim3(static_cast<unsigned>(mma_threads(s)));
  c.lds_bytes = lds_bytes;
  return c;
}

// The tree over `splits` partials of `numel` elements: its plan step and
// its launch (conv_tree_split where few elements meet many splits).
LaunchStep tree_step(std::int64_t numel, std::int64_t splits, const std::array<std::uint32_t, 3>& block) {
  if (cv::tree_by_split(numel, splits)) return {"conv_tree_split", grid3(numel, 1, 1), block, 0};
  return {"conv_tree", grid3(cv::tree_workgroups(numel), 1, 1), block, 0};
}
template <class Tout, class Tb = Tout>
void launch_tree(const cv::TreeArgs& a) {
  if (cv::tree_by_split(a.numel, a.splits))
    KGATE_LAUNCH((cv::conv_tree_split<Tout, Tb>), conv_config(a.numel), a);
  else
    KGATE_LAUNCH((cv::conv_tree<Tout, Tb>), conv_config(cv::tree_workgroups(a.numel)), a);
}

// conv_mma for the contract or scatter family.
// With a split of K, its partials go to `ws` and conv_tree adds them and
// the bias into the output; `mark` follows each launch.
template <class Tin, class Tout, bool kScatter, class Mark>
void launch_mma(const Shape& s, cv::GemmArgs args, float* ws, Mark&& mark) {
  args.wide = wide_loads(s, {args.a, args.w});
  args.wide_out = wide_stores(s, args.out);
  if (s.ksplits > 1) {
    args.tap_split = static_cast<std::int32_t>(s.tap_split);
    args.splits = static_cast<std::int32_t>(s.ksplits);
    args.ws = ws;
    args.ws_numel = s.out_numel;
  }
  with_mma_atom<Tin>([&](auto atom) {
    KGATE_LAUNCH((cv::conv_mma<decltype(atom), Tin, Tout, kScatter>),
                 mma_config(s, cv::mma_dynamic_lds_bytes(decltype(atom)::target)), args);
  });
  mark();
  if (s.ksplits > 1) {
    cv::TreeArgs ta{ws, s.out_numel, s.ksplits, args.out, cv::tree_runs(s.out_numel)};
    ta.bias = args.bias;
    ta.channels = kScatter ? s.g.cl : s.g.cs;
    launch_tree<Tout, Tin>(ta);
    mark();
  }
}

}  // namespace

ForcedSplits::ForcedSplits(std::int64_t splits) : prev_(t_forced_splits) {
  if (splits < 1) throw std::invalid_argument("ForcedSplits: the split count must be at least 1");
  t_forced_splits = splits;
}
ForcedSplits::~ForcedSplits() { t_forced_splits = prev_; }

cv::Geom conv_device_geom(const ConvProblem& p) { return shape_of(p).g; }
std::int64_t conv_wgrad_splits(const ConvProblem& p) { return shape_of(p).splits; }

Support conv_supported(const ConvProblem& p) {
  if (!supported_pair(p.src, p.dst))
    return {false, "dtype pair " + std::string(name(p.src)) + " -> " + std::string(name(p.dst)) +
                       " (supported: fp32, bf16 or fp16 in; fp32 or the input dtype out)"};
  if (p.acc != DType::fp32) return {false, "accumulator " + std::string(name(p.acc)) + " (supported: fp32)"};
  const Shape s = shape_of(p);
  const char* axis[3] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    const std::int64_t lim = a == 0 ? kMaxGridX : kMaxGridYZ;
    if (s.main_grid[a] > lim)
      return {false, std::string(main_kernel(s)) + " grid " + axis[a] + " = " + std::to_string(s.main_grid[a]) +
                         " exceeds " + std::to_string(lim)};
  }
  if (s.dp.kind == Kind::scatter && !s.one_tap && s.max_taps > cv::kMaxPhaseTaps)
    return {false, "up to " + std::to_string(s.max_taps) + " taps in one stride phase exceeds " +
                       std::to_string(cv::kMaxPhaseTaps)};
  // Backward-weight needs no workspace decline: pick_split lowers the split
  // count until the workspace fits or one split is left.
  return {};
}

Plan conv_plan(const ConvProblem& p) {
  const Shape s = shape_of(p);
  const cv::Geom& g = s.g;
  Plan pl;
  pl.op = std::string(name(p.op)) + "." + std::string(name(p.dir));
  const std::array<std::uint32_t, 3> block{cv::kThreads, 1, 1};
  if (s.atom.ok) {
    pl.variant = std::string("mma-igemm/") + s.atom.name + "/" + std::to_string(s.wgrad_halo ? cv::kWgradHaloM : cv::kMmaBM) + "x" +
                 std::to_string(cv::kMmaBN) + "x" + std::to_string(cv::kMmaBK);
    pl.params = {{"threads", mma_threads(s)}, {"tile_m", cv::kMmaBM}, {"tile_n", cv::kMmaBN},
                 {"tile_k", cv::kMmaBK},       {"atom_k", s.atom.k}};
    const std::array<std::uint32_t, 3> mblock{static_cast<std::uint32_t>(mma_threads(s)), 1, 1};
    pl.params["stages"] = cv::mma_stages(s.atom.target);
    // conv_mma's W-halo step: its taps per step, 0 where the geometry has none.
    if (mma_async(s)) pl.params["halo_taps"] = cv::halo_taps(g, s.dp.kind == Kind::scatter);
    const std::uint64_t lds = s.dp.kind == Kind::wgrad ? 0 : cv::mma_dynamic_lds_bytes(s.atom.target);  // wgrad: static LDS
    pl.steps.push_back({main_kernel(s), grid3(s.main_grid[0], s.main_grid[1], s.main_grid[2]), mblock, lds});
  } else {
    pl.variant = std::string("portable-igemm/") + main_kernel(s) + "/t" + std::to_string(cv::kTM) + "x" +
                 std::to_string(cv::kTN);
    pl.params = {{"threads", cv::kThreads}, {"tile_m", cv::kTM}, {"tile_n", cv::kTN}, {"bn", s.bn},
                 {"bm", cv::kThreads / s.bn}};
    pl.steps.push_back({main_kernel(s), grid3(s.main_grid[0], s.main_grid[1], s.main_grid[2]), block, 0});
  }
  const std::string out = std::string(name(s.dp.out));
  // Contract and scatter: each output sums `taps` taps of `channels`
  // channels, on the atom's chain or in sequence, then the bias.
  // With conv_mma's split of K: each split's chain over its run of taps,
  // then the tree over the splits (conv_tree, which adds the bias).
  auto gemm_reduction = [&](std::int64_t taps, std::int64_t channels) {
    ReductionPlan r = s.atom.ok ? mma_reduction(s.atom, s.ksplits > 1 ? std::min(taps, s.tap_split) : taps, channels)
                                : ReductionPlan::sequential(taps * channels);
    r.epilogue_ops = s.dp.bias_on_out ? 1 : 0;
    if (s.ksplits > 1) {
      r.splits = s.ksplits;
      r.combine = PartialCombine::tree;
      pl.params["tap_split"] = s.tap_split;
      pl.params["splits"] = s.ksplits;
      pl.steps.push_back(tree_step(s.out_numel, s.ksplits, block));
      pl.workspace_bytes = static_cast<std::uint64_t>(s.ksplits * s.out_numel * 4);
    }
    return r;
  };
  switch (s.dp.kind) {
    case Kind::contract: pl.reduction[out] = gemm_reduction(g.taps, g.clg); break;
    case Kind::scatter: {
      pl.params["phases"] = s.phases;
      pl.params["one_tap"] = s.one_tap;
      pl.reduction[out] = gemm_reduction(s.max_taps, g.csg);
      break;
    }
    case Kind::wgrad: {
      if (s.wgrad_halo) {
        pl.params["halo_taps"] = s.g.K[2];
        pl.params["tile_m"] = cv::kWgradHaloM;
      }
      pl.params["splits"] = s.splits;
      pl.params["slice"] = s.slice;
      if (!s.atom.ok) pl.params["rgroups"] = s.rgroups;
      pl.params["tree_runs"] = cv::tree_runs(s.dw_numel);
      pl.steps.push_back(tree_step(s.dw_numel, s.splits, block));
      // Each slice: one atom chain over its rows (conv_wgrad_mma) or a
      // sequential loop (conv_wgrad); then the tree over the slices.
      ReductionPlan r = s.atom.ok ? mma_reduction(s.atom, 1, s.slice) : ReductionPlan::sequential(s.slice);
      r.splits = s.splits;
      r.combine = PartialCombine::tree;
      pl.reduction[out] = r;
      pl.workspace_bytes = static_cast<std::uint64_t>(s.splits * s.dw_numel * 4);
      if (s.dp.db) {
        pl.params["db_splits"] = s.db_splits;
        pl.params["db_slice"] = s.db_slice;
        pl.steps.push_back({"conv_colsum", grid3(cv::colsum_workgroups(p.cout, s.db_splits), 1, 1), block, 0});
        pl.steps.push_back(tree_step(p.cout, s.db_splits, block));
        ReductionPlan d;
        d.length = s.db_slice;
        d.splits = s.db_splits;
        d.combine = PartialCombine::tree;
        pl.reduction["db"] = d;
        pl.workspace_bytes += static_cast<std::uint64_t>(s.db_splits * p.cout * 4);
      }
      break;
    }
  }
  return pl;
}

// Pointers of one launch: the direction's two operands, the bias (forward
// with bias), the main output, db (backward-weight with bias), workspace.
struct ConvPtrs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  void* dbias = nullptr;
  void* ws = nullptr;
};

// The plan's launch sequence on `d`; mark() after each launch.
template <class Mark>
void conv_launch_all(const ConvProblem& p, const Shape& s, const ConvPtrs& d, Mark&& mark) {
  with_conv_types(p.src, p.dst, [&]<class Tin, class Tout>() {
    switch (s.dp.kind) {
      case Kind::contract: {
        const cv::GemmArgs args{s.g, d.a, d.b, d.bias, d.out, s.bn};
        if (s.atom.ok) {
          launch_mma<Tin, Tout, false>(s, args, static_cast<float*>(d.ws), mark);
          break;
        }
        KGATE_LAUNCH((cv::conv_contract<Tin, Tout>), conv_config(s.main_grid[0], s.main_grid[1]), args);
        mark();
        break;
      }
      case Kind::scatter: {
        const cv::GemmArgs args{s.g, d.a, d.b, d.bias, d.out, s.bn};
        if (s.atom.ok) {
          launch_mma<Tin, Tout, true>(s, args, static_cast<float*>(d.ws), mark);
          break;
        }
        const auto cfg = conv_config(s.main_grid[0], s.main_grid[1], s.main_grid[2]);
        if (s.one_tap) KGATE_LAUNCH((cv::conv_scatter<Tin, Tout, true>), cfg, args);
        else KGATE_LAUNCH((cv::conv_scatter<Tin, Tout, false>), cfg, args);
        mark();
        break;
      }
      case Kind::wgrad: {
        float* part = static_cast<float*>(d.ws);
        cv::WgradArgs wa{s.g, d.a, d.b, part, s.bn, s.slice};
        if (s.atom.ok) {
          wa.wide = wide_loads(s, {d.a, d.b});
          wa.wide_small = wide_runs({s.g.csg}, {d.a});
          wa.halo = s.wgrad_halo && wa.wide;
          // A halo plan met with tensors not 16-byte aligned (never the
          // driver's) runs the tap-major tiles over the same slices, which
          // that path takes as they come; its grid is then not the plan's.
          rt::LaunchConfig cfg = mma_config(s);
          cfg.grid.x = static_cast<unsigned>(wgrad_tiles_x(s.g, wa.halo));
          with_mma_atom<Tin>([&](auto atom) {
            if (cv::wgrad_apack(s.g.clg) == cv::kMmaVec) KGATE_LAUNCH((cv::conv_wgrad_mma<decltype(atom), Tin>), cfg, wa);
            else KGATE_LAUNCH((cv::conv_wgrad_mma<decltype(atom), Tin, 4>), cfg, wa);
          });
        } else {
          const auto cfg = conv_config(s.main_grid[0], s.main_grid[1], s.main_grid[2]);
          wa.rgroups = s.rgroups;
          wa.splits = s.splits;
          wa.quad_large = s.g.clg % cv::kTN == 0 && reinterpret_cast<std::uintptr_t>(d.b) % (sizeof(Tin) * cv::kTN) == 0;
          if (wa.quad_large) KGATE_LAUNCH((cv::conv_wgrad<Tin, true>), cfg, wa);
          else KGATE_LAUNCH((cv::conv_wgrad<Tin, false>), cfg, wa);
        }
        mark();
        launch_tree<Tout>({part, s.dw_numel, s.splits, d.out, cv::tree_runs(s.dw_numel)});
        mark();
        if (s.dp.db) {
          float* dpart = part + s.splits * s.dw_numel;
          const void* dy = s.dp.dy_is_small ? d.a : d.b;
          const cv::ColsumArgs ca{dy, s.db_rows, p.cout, s.db_slice, s.db_splits, dpart};
          KGATE_LAUNCH((cv::conv_colsum<Tin>), conv_config(cv::colsum_workgroups(p.cout, s.db_splits)), ca);
          mark();
          launch_tree<Tout>({dpart, p.cout, s.db_splits, d.dbias, cv::tree_runs(p.cout)});
          mark();
        }
        break;
      }
    }
  });
}

std::map<Role, Tensor> conv_run(const ConvProblem& p, const Plan& plan, const std::map<Role, const Tensor*>& in,
                                const RunOptions& opt) {
  if (!(plan == conv_plan(p))) throw std::invalid_argument("conv: plan does not belong to this problem");
  const Shape s = shape_of(p);
  const char* op = "conv";
  DeviceTensor a(input(op, in, s.dp.a)), b(input(op, in, s.dp.b));
  std::unique_ptr<DeviceTensor> bias;
  if (s.dp.bias_on_out) bias = std::make_unique<DeviceTensor>(input(op, in, Role::b));
  const auto outs = p.outputs();
  const TensorSpec& main_spec = outs.front();
  const std::size_t out_bytes = static_cast<std::size_t>(checked_numel(main_spec.dims, "conv output")) * size_of(p.dst);
  DeviceTensor out(out_bytes), ws(plan.workspace_bytes);
  std::unique_ptr<DeviceTensor> dbias;
  if (s.dp.db) dbias = std::make_unique<DeviceTensor>(static_cast<std::size_t>(p.cout) * size_of(p.dst));
  if (opt.prefill_nan) {
    rt::device_memset(out.data(), opt.prefill_byte, out_bytes);
    rt::device_memset(ws.data(), opt.prefill_byte, plan.workspace_bytes);
    if (dbias) rt::device_memset(dbias->data(), opt.prefill_byte, static_cast<std::size_t>(p.cout) * size_of(p.dst));
  }
  const ConvPtrs d{a.data(), b.data(), bias ? bias->data() : nullptr, out.data(), dbias ? dbias->data() : nullptr,
                   ws.data()};
  // The checked run goes through the entry point the C ABI calls.
  DeviceArgs args;
  args.in[s.dp.a] = d.a;
  args.in[s.dp.b] = d.b;
  if (d.bias) args.in[Role::b] = d.bias;
  args.out[main_spec.role] = d.out;
  if (d.dbias) args.out[Role::db] = d.dbias;
  args.workspace = d.ws;
  conv_launch(p, plan, args);
  rt::device_synchronize();
  auto launch_all = [&](auto&& mark) { conv_launch_all(p, s, d, mark); };
  time_sequence(launch_all, opt);
  std::map<Role, Tensor> result;
  result.emplace(main_spec.role, download(out, p.dst, main_spec.dims));
  if (dbias) result.emplace(Role::db, download(*dbias, p.dst, {p.cout}));
  return result;
}

void conv_launch(const ConvProblem& p, const Plan& plan, const DeviceArgs& args) {
  if (!(plan == conv_plan(p))) throw std::invalid_argument("conv: plan does not belong to this problem");
  const Shape s = shape_of(p);
  const auto need_in = [&](Role r) {
    auto it = args.in.find(r);
    if (it == args.in.end() || !it->second) throw std::invalid_argument("conv: missing input " + std::string(name(r)));
    return it->second;
  };
  const auto need_out = [&](Role r) {
    auto it = args.out.find(r);
    if (it == args.out.end() || !it->second) throw std::invalid_argument("conv: missing output " + std::string(name(r)));
    return it->second;
  };
  if (plan.workspace_bytes > 0 && !args.workspace) throw std::invalid_argument("conv: missing workspace");
  ConvPtrs d;
  d.a = need_in(s.dp.a);
  d.b = need_in(s.dp.b);
  if (s.dp.bias_on_out) d.bias = need_in(Role::b);
  d.out = need_out(p.outputs().front().role);
  if (s.dp.db) d.dbias = need_out(Role::db);
  d.ws = args.workspace;
  rt::LaunchTrace trace;
  conv_launch_all(p, s, d, [] {});
  check_launches(plan, trace.records());
}

}  // namespace kgate::kernels
