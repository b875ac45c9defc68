// The typed launch plan of a convolution (conv3d and conv_transpose3d, every
// direction): every policy choice of conv_kernels.hpp's kernels, decided once
// here from the problem and the backend's MMA target, and nowhere else. The
// kernels read its fields through their argument structs (gemm_args,
// wgrad_args); conv3d.cpp launches exactly its steps.
//
// The plan assumes what the driver guarantees (kernels/README): dense NDHWC
// tensors, each 16-byte aligned. Its load and store widths are functions of
// the channel counts alone; a launch on a tensor not aligned as the plan's
// accesses of it need is refused (conv_check_alignment), never run on
// another path. (A tensor the plan reads or writes in 16-byte runs has a
// multiple of 16 bytes, so the host emulator's allocations, which end at a
// guard page, start aligned too.)
//
// A plan travels as the generic kernels::Plan (to_plan: what reports, the
// oracle and the bench read). conv_plan_from reads one back: its choices
// (split counts, the W-halo steps, the portable kernels' work-item shape)
// are taken from the plan, checked against what the kernels can run, and
// everything else is derived again, so a plan handed to conv_run is the
// plan it executes, whether or not it is the one conv_plan_for would choose.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/api.hpp"
#include "kernels/conv3d/conv_kernels.hpp"
#include "reference/conv3d/conv_geometry.hpp"

namespace kgate::kernels {

// The policy constants of the conv plans (the kernels' compile-time tile
// shapes are conv_kernels.hpp's; these are the choices made over them).
namespace conv_policy {
// Split-K of backward-weight and dbias: about kSliceRows rows per slice, at
// most kMaxSplits slices, and a workspace of at most kMaxWorkspace bytes.
// The splits are what spreads a weight gradient with few output tiles (a
// 1x1x1 head, a first layer of 3 channels) over the device, so their cap is
// high; the tree over them is ceil(log2 splits) deep.
inline constexpr std::int64_t kSliceRows = 1024;
inline constexpr std::int64_t kMaxSplits = 4096;
inline constexpr std::int64_t kMaxWorkspace = std::int64_t{256} << 20;
// dbias: the column sums' work-items to aim for and their shortest slice.
inline constexpr std::int64_t kColsumItems = 65536, kMinColsumSlice = 256;
// Portable kernels: work-items along N at most (so that a workgroup spans
// >= 4 tile rows).
inline constexpr int kMaxBn = 16;
inline constexpr std::int64_t kMaxGridX = 0x7fffffff, kMaxGridYZ = 65535;
// The contract and scatter families run on matrix cores (conv_mma) for
// bf16 / fp16 when the channels per tap are at least kMmaMinK (an RGB
// input: the U-Net's first layer, where even 3 of an atom's 16 K lanes beat
// the portable kernel on the GPU), the output channels per group kMmaMinN
// (a quarter of the block tile's N) and the GEMM rows (of the largest
// stride phase) one block tile. Below that most of each instruction is
// padding, which costs the host emulator (every atom through its numeric
// model) more than the portable kernel. The contract family also takes
// fewer output channels where its source's channels per group are whole
// 16-byte runs of at least a block step (the U-Net's 1x1x1 head: 6 output
// channels over 64): its time is then the stream of its source, which
// conv_mma reads in 16-byte copies and the portable kernel element by
// element.
inline constexpr std::int64_t kMmaMinK = 3, kMmaMinN = 16;
// Backward-weight runs on matrix cores (conv_wgrad_mma) for bf16 / fp16
// when the small channels per group fill a quarter of the block tile's N,
// the taps x large channels a quarter of its M and the rows one block step.
inline constexpr std::int64_t kMmaMinWgradM = cv::kMmaBM / 4;
// conv_mma's split of K by taps, for layers of few block tiles and a long
// K (the U-Net's deepest layers: 8^3 positions and 512-1024 channels have
// 32 to 64 tiles, each walking 27 taps, fewer than a GPU has
// multiprocessors; the plan reads no device property, so the threshold is
// a constant): the taps (of a phase) in runs, so that the tiles x splits
// approach kMmaSplitBlocks and every split keeps at least kMmaSplitSteps
// block steps.
inline constexpr std::int64_t kMmaSplitBlocks = 256, kMmaSplitSteps = 64;
// The most workgroups (tiles x splits) the split gives conv_wgrad_mma:
// about eight waves of two workgroups per multiprocessor on a 132-SM GPU,
// four and a half on a 228-CU one. Without it the split rule gives the
// large layers the workspace's whole kMaxWorkspace of partials, written
// once and read again by the tree.
inline constexpr std::int64_t kMmaWgradBlocks = 2048;
// The tree over split partials: conv_tree_split (one workgroup per element)
// where at least kTreeSplitMinSplits splits meet at most
// kTreeSplitMaxNumel elements; otherwise conv_tree over runs of kThreads
// elements, up to kTreeMaxRuns runs per workgroup once there are more than
// kTreeWideGroups workgroups' worth.
inline constexpr std::int64_t kTreeSplitMinSplits = 64, kTreeSplitMaxNumel = 8192;
inline constexpr int kTreeMaxRuns = 16;
inline constexpr std::int64_t kTreeWideGroups = 4096;
}  // namespace conv_policy

// The kernel a plan step launches (its name is the kernel's symbol).
enum class ConvKernel { contract, contract_mma, scatter, scatter_one_tap, scatter_mma, wgrad, wgrad_mma, tree, tree_split, colsum };
const char* kernel_name(ConvKernel k);

// The MMA atom this backend runs for the problem's input dtype (HIP:
// gfx942, CUDA: sm90, host: its configured target), as data.
struct ConvAtom {
  bool ok = false;  // the main kernel runs on matrix cores
  rt::Target target = rt::Target::gfx942;
  int m = 0, n = 0, k = 0, lanes = 0;
  const char* name = "";
};

// A combine of `splits` fp32 partials of `numel` elements each.
struct ConvTree {
  std::int64_t numel = 0, splits = 1;
  bool by_split = false;  // conv_tree_split, else conv_tree
  int runs = 1;           // conv_tree: runs of kThreads elements per workgroup
  std::int64_t workgroups = 1;
};

// The tree a plan takes over `splits` partials of `numel` elements
// (conv_policy's kTree* constants).
ConvTree conv_tree_for(std::int64_t numel, std::int64_t splits);

struct ConvPlan {
  ref::detail::DirPlan dp;  // the direction's roles
  cv::Geom g{};
  ConvKernel main = ConvKernel::contract;
  ConvAtom atom;
  int threads = cv::kThreads;  // work-items per workgroup of the main kernel
  std::array<std::int64_t, 3> grid{1, 1, 1};
  std::uint64_t lds_bytes = 0;  // the main kernel's dynamic LDS
  // The portable kernels: work-items along N (a power of two up to
  // conv_policy::kMaxBn); conv_wgrad's row groups per split.
  int bn = 1;
  int rgroups = 1;
  // The scatter family: stride phases (grid z), the most taps of one phase.
  std::int64_t phases = 1, max_taps = 1;
  // Load and store widths (functions of the channel counts; the tensors
  // are 16-byte aligned): conv_mma's and conv_wgrad_mma's 16-byte loads,
  // conv_mma's staged 16-byte stores, conv_wgrad_mma's 16-byte loads of the
  // small operand alone, conv_wgrad's kTN-wide loads of the large one, and
  // conv_wgrad_mma's packs of M columns (cv::wgrad_apack).
  bool wide = false, wide_out = false, wide_small = false, quad_large = false;
  int apack = cv::kMmaVec;
  int stages = 0;  // matrix cores: LDS stages (cv::mma_stages)
  // conv_mma's W-halo step: its W taps and segment length (0: tap-major
  // steps); conv_wgrad_mma's W-halo tile: its segment length (0: none).
  int halo_taps = 0;
  std::int32_t halo_seg = 0, wgrad_halo_seg = 0;
  // conv_mma's split of K: runs of tap_split taps, ksplits of them (0, 1:
  // none), combined by `ktree`.
  std::int64_t tap_split = 0, ksplits = 1;
  ConvTree ktree;
  // Backward-weight: K rows, its split into slices and the tree over them;
  // dbias: the same over dy's rows (conv_colsum, then db_tree).
  std::int64_t rows = 0, splits = 1, slice = 1;
  std::int64_t db_rows = 0, db_splits = 1, db_slice = 1;
  std::int64_t dw_numel = 0, out_numel = 0;
  ConvTree tree, db_tree;
  std::int64_t colsum_workgroups = 0;
  std::uint64_t workspace_bytes = 0;
};

// The plan kgate chooses for p (conv_supported(p) need not hold: the
// support check reads its grid).
ConvPlan conv_plan_for(const ConvProblem& p);
// Test only (the split-K sweep): the plan that splits every reduction it
// can split into `splits` slices where the problem has that many rows
// (backward-weight's dw and db) or taps (conv_mma's split of K; the W-halo
// step has none), whole slices each, and none at 1. Throws
// std::invalid_argument for splits < 1.
ConvPlan conv_plan_split(const ConvProblem& p, std::int64_t splits);
// Why the kernels cannot run cp (its grid past the device's limits, a
// stride phase with more taps than conv_mma's list holds), or "" when they
// can.
std::string conv_plan_limits(const ConvPlan& cp);
// The generic plan (steps, params, reductions, workspace) of a typed one.
Plan to_plan(const ConvProblem& p, const ConvPlan& cp);
// The typed plan `plan` describes for p: its choices read from
// plan.params, each checked against what the kernels can run, the rest
// derived; throws std::invalid_argument naming the field that is missing,
// out of range, or not what the choices imply.
ConvPlan conv_plan_from(const ConvProblem& p, const Plan& plan);
// The plan of p that makes the choices `plan` makes, every derived field
// computed again (a plan edited by hand: change a choice, complete it);
// throws as conv_plan_from does for a choice out of range.
Plan complete_conv_plan(const ConvProblem& p, const Plan& plan);

// The main kernel's arguments (the tensors' pointers filled by the caller).
cv::GemmArgs gemm_args(const ConvPlan& cp);
cv::WgradArgs wgrad_args(const ConvPlan& cp);
cv::TreeArgs tree_args(const ConvTree& t);
// Throws std::invalid_argument naming `what` when ptr is not aligned to
// `bytes` (what the plan's accesses of that tensor need).
void conv_check_alignment(const void* ptr, const char* what, std::size_t bytes);

}  // namespace kgate::kernels
