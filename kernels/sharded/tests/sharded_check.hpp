// Shared by the mpi tests: the fp64 reference as a local operator, the
// choice between it and the production kernels, and the sharded-versus-whole
// check with the whole-volume reference as the oracle.
#pragma once

#include <mpi.h>

#include <string>

#include "kernels/sharded/sharded.hpp"
#include "reference/fill.hpp"

namespace kgate::sharded::test {

// The direct fp64 reference, rounded once to each output's dtype: a kernel
// whose every output element is the correctly ordered fp64 sum of its terms,
// declared as one sequential fp32 reduction of the problem's length: the
// oracle models an fp32 output as the accumulator's own last rounding, and an
// fp64 sum rounded once to fp32 is within that bound. Adding
// the exact zeros of a halo does not change an fp64 sum, so the adapter form
// gives the logical form's bits.
LocalOp reference_op();

// The production kernels when every rank's local problem has one (route
// agrees), else the reference. Collective.
LocalOp kernels_or_reference(MPI_Comm comm, const Problem& whole, const Slabs& slabs, GnStats gn);

struct Verdict {
  bool ok = true;
  std::string evidence;  // rank 0's account (what ran, what differed)
  std::int64_t bitwise_elements = 0;  // elements compared bit for bit (all ranks)
  std::int64_t oracle_elements = 0;   // elements judged by the oracle (all ranks)
};

// Runs `whole` sharded over the ranks of `comm` with `slabs` on inputs drawn
// from `fill` and checks, at rank 0 after gathering:
//   - every output against the whole-volume fp64 reference under the oracle,
//     with the sharded reduction plan (Output::reduction); GroupNorm per-shard
//     statistics: each rank's outputs against its slab's reference, and
//     dgamma/dbeta equal to the rank-ordered sum of the slabs' results;
//   - conv fwd: every element bit for bit equal to the local operator run on
//     the whole volume, when the local and whole plans declare the same
//     reduction for y; bwd_data: the same for every plane at least h planes
//     away from a cut (the planes near a cut add two or three rounded parts);
//   - bwd_weight and GroupNorm backward: a second run gives the same bits.
// The verdict is agreed by every rank of comm. Collective.
Verdict sharded_vs_whole(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const Fill& fill, GnStats gn,
                         const LocalOp& op);

}  // namespace kgate::sharded::test
