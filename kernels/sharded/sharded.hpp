// Sharded operators: one logical (whole-volume) problem split along D over
// the ranks of an MPI communicator, each rank holding a slab of planes, as
// DistConv runs the U-Net of configurations C and D. The adapter computes
// each rank's part through a local operator (the production kernels of
// kernels/api.hpp by default, so it works for every operator-direction that
// has a kernel) and does the communication around it:
//
//   conv3d, stride 1 along D, kernel kd odd, padding (kd-1)/2 along D
//   (halo h = kd/2 planes per side; the U-Net's k=3 convs have h = 1, its
//   k=1 head h = 0):
//     fwd         each rank sends its first and last h planes of x to its
//                 neighbours and runs the adapter form: input D_loc + 2h
//                 (the neighbours' planes, zeros at the volume's edge),
//                 padding 0 along D and the logical padding on H and W.
//     bwd_data    runs the adapter form's backward-data (dx has D_loc + 2h
//                 planes), sends the 2h halo planes of dx back to the
//                 neighbours that own them, which add them (own, then from
//                 the previous rank, then from the next, summed in fp64 and
//                 rounded once to dx's dtype); the volume edge's halo planes
//                 are the padding's gradient and are dropped.
//     bwd_weight  exchanges x's halo as the forward does, runs the adapter
//                 form's backward-weight, and reduces the ranks' partial dw
//                 (and db) in a fixed binary tree over rank numbers (rank r
//                 adds rank r+s at step s = 1, 2, 4, ..., in fp64), rounds
//                 once and broadcasts: deterministic, unlike MPI_Allreduce,
//                 whose summation order MPI does not fix.
//   conv_transpose3d with kd = stride along D, no padding, dilation 1 (the
//   U-Net's k=2 s=2 up-convs): no halo; a rank's x slab maps to stride times
//   as many y planes; bwd_weight reduces as above.
//   groupnorm per-shard statistics (as the benchmark runs it): each rank
//   normalises its slab with its own statistics through the local operator;
//   backward reduces dgamma and dbeta over the ranks as bwd_weight does.
//   groupnorm global statistics (an option): the statistics of the whole
//   volume, through the local operator's two GroupNorm phases
//   (kernels::groupnorm_partials / groupnorm_finish): each rank's kernel
//   computes its slab's per-group moments (forward) or per-channel sums
//   (backward, with the whole volume's mean and rstd); the ranks combine
//   them in the fixed rank tree in fp64 (Chan's formula for moments), round
//   once to fp32, and each rank's kernel finishes with the combined values:
//   mean and rstd by the kernel's own formula, then y; or dx, dgamma and
//   dbeta with the whole volume's group size.
//
// Slabs are of the forward's input x along D (conv_transpose3d's y slabs are
// stride times larger). Activations (x, y, dx, dy) are passed and returned as
// this rank's slab; w, b, gamma, beta, dw, db, dgamma, dbeta are whole and
// identical on every rank; GroupNorm's mean and rstd (forward outputs,
// backward inputs) are the slab's own with per-shard statistics and the
// whole volume's, identical on every rank, with global statistics.
//
// Collective contract: every function taking a communicator is called by
// every rank of it with the same problem and slabs. Whether the ranks run a
// problem is decided collectively (route: the minimum of every rank's local
// verdict), so one rank that would decline alone cannot leave a neighbour
// waiting on a receive; a failed local run is likewise agreed on before any
// exchange that depends on it. Every error is thrown as ShardError on every
// rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/api.hpp"

namespace kgate::sharded {

struct ShardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Rank r holds planes [begin[r], begin[r+1]) of x's D axis.
struct Slabs {
  std::vector<std::int64_t> begin{0, 1};
  int ranks() const { return static_cast<int>(begin.size()) - 1; }
  std::int64_t d0(int r) const { return begin.at(r); }
  std::int64_t size(int r) const { return begin.at(r + 1) - begin.at(r); }
  std::int64_t total() const { return begin.back(); }
  bool operator==(const Slabs&) const = default;
};
// D/ranks planes each, the remainder one more to the first ranks.
Slabs even_slabs(std::int64_t d, int ranks);
Slabs slabs_of_sizes(const std::vector<std::int64_t>& sizes);
std::string to_string(const Slabs& s);  // "0|3|8|12" (the plane boundaries)

// What computes one rank's local problem.
struct LocalOp {
  std::string name;
  std::function<kernels::Support(const Problem&)> supported;
  std::function<kernels::Plan(const Problem&)> plan;
  std::function<std::map<Role, Tensor>(const Problem&, const kernels::Plan&, const std::map<Role, const Tensor*>&)> run;
  // GroupNorm with global statistics (may be empty: route then declines
  // GnStats::global): kernels::groupnorm_partials / groupnorm_finish.
  std::function<Tensor(const GroupNormProblem&, const std::map<Role, const Tensor*>&)> gn_partials;
  std::function<std::map<Role, Tensor>(const GroupNormProblem&, const std::map<Role, const Tensor*>&, const Tensor&,
                                       std::int64_t)>
      gn_finish;
};
// kernels::is_supported / plan / run / groupnorm_partials / groupnorm_finish.
LocalOp production_kernels();

enum class GnStats : std::uint8_t { per_shard, global };

// How a problem splits along D (a function of the whole problem alone).
struct Split {
  bool ok = false;
  std::string reason;     // why not, when !ok
  std::int64_t halo = 0;  // planes per side
  std::int64_t y_per_x = 1;  // y planes per x plane
};
Split split_of(const Problem& whole);

// Rank r's part of `whole`: the adapter form of its slab (conv with a halo),
// the slab in logical form (no halo), or the slab's GroupNorm. Throws
// ShardError when the slab is too thin for the halo (fewer than max(1, h)
// planes: a neighbour's halo would have to come from two ranks away).
Problem local_problem(const Problem& whole, const Slabs& slabs, int rank);

// Whether `r` of p is an activation split along D, and rank `rank`'s planes
// of it [first, last).
bool is_activation(const Problem& p, Role r);
std::pair<std::int64_t, std::int64_t> role_planes(const Problem& whole, Role r, const Slabs& slabs, int rank);

// The collective routing decision. Every rank computes its local verdict
// (splittable, slab count = ranks, slabs cover D, slab not thin, the local
// operator supports its local problem; with GnStats::global only GroupNorm,
// through an operator with the GroupNorm phases that supports the whole problem too)
// and all ranks agree on the minimum, with the reason of the lowest declining
// rank ("rank 1: ..."). Ranks passing different problems or slabs decline too.
kernels::Support route(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const LocalOp& op,
                       GnStats gn = GnStats::per_shard);

struct Output {
  std::map<Role, Tensor> tensors;  // by role, as described at the top of this file
  Problem local;                   // what the local operator ran
  kernels::Plan local_plan;
  // Per output role, the reduction structure of the sharded result (the
  // local plan with the cross-rank sums as further splits whose partials are
  // stored in the output dtype): what the oracle bounds the result with.
  std::map<std::string, ReductionPlan> reduction;
};

// Runs the sharded operator (route first: ShardError on every rank when it
// declines). `in`: every input role of `whole`, activations as this rank's
// slab (role_planes), the others whole.
Output run(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const std::map<Role, const Tensor*>& in,
           const LocalOp& op = production_kernels(), GnStats gn = GnStats::per_shard);

// Planes [d0, d1) of a [N][D][H][W][C] tensor.
Tensor d_planes(const Tensor& t, std::int64_t d0, std::int64_t d1);
// Every rank's slab of an activation, concatenated along D on `root` (empty
// tensor on the other ranks). Collective.
Tensor gather_planes(MPI_Comm comm, const Tensor& slab, int root = 0);

// The reduction plan of a sum of `parts` partial results each computed with
// `local` and rounded to `stored` (tree combine; the parts' combine level
// count is ceil(log2 parts), added to the local splits' as a power of two).
ReductionPlan combined(const ReductionPlan& local, std::int64_t parts, DType stored);

// What the calling thread of this process is doing in the sharded code
// ("halo exchange with ranks 0 and 2", ...): the watchdog prints it.
std::string current_phase();

}  // namespace kgate::sharded
