// The split partials' kernels: dbias's column sums (conv_colsum) and the
// fixed trees that combine partials (conv_tree, conv_tree_split).
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_common.hpp"

namespace kgate::kernels::cv {

// ---------------------------------------------------------------------------
// Column sums of a [rows][cols] tensor (dbias): work-item w of the grid
// sums column w % cols over slice w / cols, the rows in order (so a layer
// of few columns, the head's 6, still has a work-item per column and
// slice, not a workgroup mostly idle), with the loads of kColsumRows rows
// issued before their sums.
inline constexpr int kColsumRows = 8;

template <class Tin>
KGATE_KERNEL_BOUNDS(conv_colsum, kThreads, ColsumArgs a) {
  const std::int64_t w = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  const std::int64_t c = w % a.cols, split = w / a.cols;
  if (split >= a.splits) return;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < a.rows ? r_begin + a.slice : a.rows;
  const Tin* x = static_cast<const Tin*>(a.x) + c;
  float acc = 0.0f;
  for (std::int64_t r = r_begin; r < r_end; r += kColsumRows) {
    float v[kColsumRows];
KGATE_UNROLL
    for (int k = 0; k < kColsumRows; ++k) v[k] = r + k < r_end ? to_f32(x[(r + k) * a.cols]) : 0.0f;
KGATE_UNROLL
    for (int k = 0; k < kColsumRows; ++k)
      if (r + k < r_end) acc = acc + v[k];
  }
  a.ws[split * a.cols + c] = acc;
}

// ---------------------------------------------------------------------------
// The fixed tree over split partials: level w adds partial s + w into s for
// s = 0, 2w, 4w, ... (w = 1, 2, 4, ...), then element e of partial 0 is the
// result, rounded once to Tout. A workgroup covers `runs` consecutive runs
// of kThreads elements (a work-item one element of each run, so every access
// stays coalesced; the plan chooses the runs: kernels/conv3d/conv_plan.hpp).

// The combined sum of element e (at p[0]), the bias added, rounded once.
template <class Tout, class Tb>
KGATE_DEVICE void put_tree(const TreeArgs& a, std::int64_t e, float y) {
  if (a.bias) y = with_bias(static_cast<const Tb*>(a.bias), e % a.channels, y);
  static_cast<Tout*>(a.out)[e] = from_f32<Tout>(y);
}

template <class Tout, class Tb = Tout>
KGATE_KERNEL_BOUNDS(conv_tree, kThreads, TreeArgs a) {
  const std::int64_t e0 = static_cast<std::int64_t>(rt::block_idx().x) * kThreads * a.runs + rt::thread_idx().x;
  for (int run = 0; run < a.runs; ++run) {
    const std::int64_t e = e0 + std::int64_t{run} * kThreads;
    if (e >= a.numel) return;
    float* p = a.ws + e;
    for (std::int64_t w = 1; w < a.splits; w *= 2)
      for (std::int64_t s = 0; s + w < a.splits; s += 2 * w) {
        const float l = p[s * a.numel], r = p[(s + w) * a.numel];
        p[s * a.numel] = l + r;
      }
    put_tree<Tout, Tb>(a, e, p[0]);
  }
}

// The same tree with the splits of one element across a workgroup (grid x
// = the element): at level w its work-items add the pairs (s, s + w) side
// by side, a barrier between levels, every pair's sum l + r as conv_tree
// forms it (the same bits). For few elements over many splits
// (the plan's choice), where conv_tree's one work-item per element would
// add its splits - 1 pairs one after another.

template <class Tout, class Tb = Tout>
KGATE_KERNEL_BOUNDS(conv_tree_split, kThreads, TreeArgs a) {
  const std::int64_t e = rt::block_idx().x;
  const std::int64_t t = rt::thread_idx().x;
  float* p = a.ws + e;
  for (std::int64_t w = 1; w < a.splits; w *= 2) {
    for (std::int64_t s = t * 2 * w; s + w < a.splits; s += kThreads * 2 * w) {
      const float l = p[s * a.numel], r = p[(s + w) * a.numel];
      p[s * a.numel] = l + r;
    }
    rt::barrier();  // level w's sums before level 2w reads them
  }
  if (t == 0) put_tree<Tout, Tb>(a, e, p[0]);
}

}  // namespace kgate::kernels::cv
