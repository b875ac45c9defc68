// The device reference: the fp64 references of all eight operator-directions
// (conv3d and conv_transpose3d forward, backward-data, backward-weight;
// GroupNorm forward and backward) computed on the backend this binary runs
// (the host emulator, CUDA, HIP) through kgate's runtime, with what the
// oracle's bounds need beside them. It is a reference, not a production
// kernel: fp64, fixed summation orders, 64-bit indexing; it exists so that a
// full-size check on a GPU does not wait for the CPUs.
//
// Contract, per operator:
//   - conv (every direction): want = each output's terms in the host
//     references' order (detail::for_each_term), summed with Dot2 (plus the
//     bias; db over dy in element order): exactly the host reference
//     conv(p, in, Impl::dot2), bit for bit. abs = the same on magnitudes:
//     exactly conv_abs(p, in, Impl::dot2).
//   - GroupNorm: the formulas of ref_groupnorm.hpp in the fast reference's
//     form (two-pass statistics, centred backward), every sum a Dot2 over
//     fixed chunks of kChunkRows rows merged in order; the companion
//     (GroupNormCompanion) likewise. Within a few fp64 ulps of the
//     companion of the host fast reference (`kgate refcheck` measures it).
//   - Results are a function of the problem and the inputs only (never of
//     the device, the grid or the thread count).
// `kgate refcheck` gates it against the host references.
#pragma once

#include <cstdint>
#include <string>

#include "reference/conv3d/ref_common.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"
#include "reference/problem.hpp"

namespace kgate::ref::device {

// A defect planted in the device reference, for the negative controls of
// its gate (never set otherwise): bump_last adds 1 to a convolution's last
// output element; skip_chunk leaves the last chunk of GroupNorm group 0 out
// of its mean.
enum class Defect : int { none = 0, bump_last = 1, skip_chunk = 2 };

struct Result {
  Outputs want;                   // one fp64 tensor per output role of p
  Outputs abs;                    // conv: the absolute companion per output role
  GroupNormCompanion companion;   // GroupNorm: statistics and companion
};

// Runs the device reference of p on inputs `in` (every input role of p, any
// dtype: read exactly as fp64). Device memory: the inputs and outputs in
// fp64, about 8 bytes per element of each. Throws rt::Error (rt::OutOfMemory
// when the device is full) for a failure of the device.
Result run(const Problem& p, const Inputs& in, Defect defect = Defect::none);

}  // namespace kgate::ref::device
