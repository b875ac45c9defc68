// Convolution kernels for NDHWC tensors: the six operator-directions of
// conv3d and conv_transpose3d as three implicit GEMMs over one geometry
// (reference/conv3d/conv_geometry.hpp: a "small" side S, a "large" side L and
// a weight [small channel][KD][KH][KW][large channel per group]; conv3d's
// small side is its output, conv_transpose3d's its input). One source for
// every backend (kernels/runtime/runtime.hpp).
//
//   contract  out[n, i, cs]  = sum_{tap, q} large[n, j(i, tap), grp*clg + q] * w[cs, tap, q]
//             conv3d.fwd, conv_transpose3d.bwd_data.
//             GEMM: M = N*prod(S), N = cs/g, K = taps*clg.
//   scatter   out[n, j, cl]  = sum_{tap, q} small[n, i(j, tap), grp*csg + q] * w[grp*csg + q, tap, cl]
//             conv3d.bwd_data, conv_transpose3d.fwd.
//             GEMM: M = positions of one stride phase, N = cl/g, K = taps*csg.
//   wgrad     dw[cs, tap, q] = sum_{n, i} small[n, i, cs] * large[n, j(i, tap), grp*clg + q]
//             conv3d.bwd_weight (small = dy, large = x), conv_transpose3d.bwd_weight
//             (small = x, large = dy): the same kernel with the operands swapped.
//             GEMM: M = cs/g, N = taps*clg, K = N*prod(S), split into slices.
// where j(i, tap) = i*stride - pad_front + tap*dil per axis, and a term whose
// j falls outside L (padding) is absent.
//
// Backward-data for stride > 1 (the scatter family) is decomposed by stride
// phase: the large positions j with j mod stride = ph (per axis) form one
// GEMM (grid z = phase), and for that phase the taps k with
// (ph + pad - k*dil) mod stride = 0 are exactly the ones that contribute, the
// same for every position of the phase, with i = t + (ph + pad - k*dil)/stride
// for j = ph + stride*t. A workgroup therefore never evaluates a tap that
// does not land on the stride lattice and never branches per position on
// divisibility; stride 1 is one phase with every tap (the forward contraction
// on the flipped, channel-swapped weight). The non-overlapping case k = s,
// dil = 1 (the U-Net's k2 s2 up-sampling) has exactly one tap per phase,
// tap = (ph + pad) mod s: conv_scatter<.., true> runs it as a 1x1 GEMM per
// phase without the tap loop.
//
// Portable work decomposition: a workgroup is kThreads work-items (one gfx942 wave),
// bn of them along N and kThreads/bn along M; each owns a kTM x kTN register
// tile of the output and loops over K with fp32 accumulators, with no LDS and
// no barrier (cheap to emulate: a work-item runs to completion). Every output
// element is the sequential sum of its terms in the order taps (KD, KH, KW),
// then channels ascending; absent terms are skipped, not added as zero.
// Products and sums are separate IEEE operations (no contraction on any
// backend): bf16 and fp16 products are exact in fp32.
//
// Backward-weight is deterministic by construction: slice s of `splits`
// writes its fp32 partial of every dw element to ws[s][element], and
// conv_tree combines the partials of each element in a fixed pairwise tree
// (stride 1, 2, 4, ... ; depth ceil(log2 splits)), or conv_tree_split the
// same tree with one workgroup per element where few elements meet many
// splits; dbias is the same with conv_colsum's column sums of dy. No atomics; splits and slices are
// functions of the problem alone (kernels/conv3d/conv3d.cpp). conv_mma
// splits K the same way where a layer has few block tiles and a long K
// (GemmArgs::tap_split: runs of whole taps, each split's fp32 partial to
// the workspace, conv_tree adding the splits and then the bias).
//
// Matrix cores (conv_mma<Atom, Tin, Tout, kScatter>): the contract family,
// and the scatter family per stride phase, for bf16 and fp16 inputs run on
// the runtime's MMA atoms (kernels/runtime/mma.hpp) where the channels fill
// an atom and the rows a block tile (plan: "mma-igemm"): gfx942 v_mfma_f32_32x32x8 on HIP and on the
// host emulator's default target, sm_90 mma.sync m16n8k16 on CUDA. Both
// families are one GEMM to this kernel: GEMM row i at tap e reads the source
// position i*mul + off(e) (contract: mul = stride, off = k*dil - pad over
// every tap; scatter: mul = 1, off = the phase's lattice offset of each of
// its taps, listed once per workgroup), and B(q, c) is the weight read
// through an index map, never a transformed copy: contract w[c][tap][q],
// scatter w[q][tap][c] (stride 1: the forward contraction on the flipped,
// channel-swapped weight). A workgroup of four waves owns a
// kMmaBM x kMmaBN block tile (waves in a grid, each a fixed grid of atoms:
// MmaTile) and walks K in block steps of one tap x kMmaBK channels, one
// barrier per step, reading the staged operands back with the runtime's LDS
// fragment loads (ldmatrix on CUDA; layouts come only from the atom's
// tables). How a step reaches LDS depends on the atom's target
// (mma_stages): for sm_90 atoms with 16-byte channel runs, asynchronous
// copies (cp.async) into three stages, two steps ahead of the atoms, the
// scatter family's weight rows staged K-major as they arrive, and where the
// W axis allows it the W-halo step instead (halo_taps: one step stages the
// source rows of a (kd, kh) pair once for all its W taps, kHaloBK channels
// wide); for gfx942
// atoms (no 16-byte asynchronous copy), and where channel counts or
// alignment need element loads, 16-byte (or element) loads into registers
// issued before the current step's atoms and stored into the other of two
// stages after them. Each work-item's A rows are decoded once
// and the block steps advance without a division; per tap only the source
// offsets change. Each output is one chain of atom instructions in the
// order taps, then channels in atom-K chunks (the W-halo step: (kd, kh)
// pairs, then channels in atom-K chunks, then W taps; a chunk past the channels is
// not issued; absent terms and channels past the end of a chunk load as +0,
// which adds nothing to an exact sum): the chain the plan's ReductionPlan
// counts, so the host's sm90 model reproduces CUDA bit for bit.
// Backward-weight has its own matrix-core kernel over the same block tile
// and block step (conv_wgrad_mma), and on sm_90 a W-halo tile of its own
// (wgrad_halo_seg: one (kd, kh) pair's three W taps of 64 large channels,
// their large rows staged once per segment of positions along W). fp32
// inputs and channel counts an atom does not fill take the portable path.
//
// Indexing is 64-bit throughout (tensors may pass 2^31 elements).
//
// The kernels, a file per role:
//   conv_args.hpp       constants, geometry, the argument structs
//   conv_common.hpp     the helpers every kernel shares
//   conv_portable.hpp   conv_contract, conv_scatter
//   conv_mma_tile.hpp   the matrix-core block tile, its loads and pipelines
//   conv_mma_operands.hpp  conv_mma's GEMM view and operand iterators
//   conv_mma_epilogue.hpp  conv_mma's epilogues
//   conv_mma.hpp        conv_mma: iterator x pipeline x epilogue
//   conv_wgrad_mma.hpp  conv_wgrad_mma (backward-weight on matrix cores)
//   conv_wgrad.hpp      conv_wgrad (backward-weight, portable)
//   conv_tree.hpp       conv_colsum, conv_tree, conv_tree_split
// and their policy in conv_plan.hpp.
#pragma once

#include "kernels/conv3d/conv_args.hpp"
#include "kernels/conv3d/conv_common.hpp"
#include "kernels/conv3d/conv_portable.hpp"
#include "kernels/conv3d/conv_mma_tile.hpp"
#include "kernels/conv3d/conv_mma_operands.hpp"
#include "kernels/conv3d/conv_mma_epilogue.hpp"
#include "kernels/conv3d/conv_mma.hpp"
#include "kernels/conv3d/conv_wgrad_mma.hpp"
#include "kernels/conv3d/conv_wgrad.hpp"
#include "kernels/conv3d/conv_tree.hpp"
