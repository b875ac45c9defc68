// Generated shardings against the whole volume: a rank count (1 to the ranks
// of this run, the others idle), uneven D slabs (empty and thin ones
// included), conv3d with k in {1, 3, 5} along D (padding k/2, stride 1),
// every direction, bf16 or fp32, n, channels, groups, H, W small. A sharding
// whose slabs are all at least max(1, k/2) planes must match the whole-volume
// reference (sharded_check.hpp); any other must be refused on every rank with
// "thin shard". The local operator is the production kernel when every rank's
// local problem has one, else the fp64 reference.
//
// Every rank generates the same case (RC_PARAMS fixes the seed in CTest) and
// the verdict is agreed by all ranks before RC_ASSERT, so shrinking proceeds
// in step on every rank.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <functional>

#include "kernels/sharded/tests/sharded_check.hpp"
#include "reference/descriptor.hpp"

namespace kgate::sharded {
namespace {

int world(int* rank) {
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

bool agreed(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

RC_GTEST_PROP(ShardedProps, ShardingMatchesTheWholeVolume, ()) {
  int me = 0;
  const int size = world(&me);
  const int ranks = *rc::gen::element(1, std::min(2, size), size, size);
  std::vector<std::int64_t> sizes = *rc::gen::container<std::vector<std::int64_t>>(
      static_cast<std::size_t>(ranks), rc::gen::inRange<std::int64_t>(0, 7));
  std::int64_t d = 0;
  for (auto s : sizes) d += s;
  if (d == 0) d = sizes[0] = 1;
  const std::int64_t k = *rc::gen::element<std::int64_t>(1, 3, 5);
  ConvProblem c;
  c.op = ConvOp::conv3d;
  c.dir = *rc::gen::element(ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight);
  c.n = *rc::gen::inRange<std::int64_t>(1, 3);
  c.groups = *rc::gen::inRange<std::int64_t>(1, 3);
  c.cin = c.groups * *rc::gen::inRange<std::int64_t>(1, 4);
  c.cout = c.groups * *rc::gen::inRange<std::int64_t>(1, 4);
  const std::int64_t kh = *rc::gen::element<std::int64_t>(1, 3);
  c.in = {d, *rc::gen::inRange<std::int64_t>(1, 5), *rc::gen::inRange<std::int64_t>(1, 5)};
  c.kernel = {k, kh, 1};
  c.pad_front = c.pad_back = {k / 2, kh / 2, 0};
  c.bias = c.dir != ConvDir::bwd_data && *rc::gen::arbitrary<bool>();
  c.src = c.dst = *rc::gen::element(DType::bf16, DType::fp32);
  const Problem p = c;
  const bool lattice = *rc::gen::arbitrary<bool>();
  const Fill fill = lattice ? lattice_fill(p, 7) : parse_fill("signed", 7);
  const Slabs slabs = slabs_of_sizes(sizes);
  bool thin = false;
  for (auto s : sizes) thin = thin || s < std::max<std::int64_t>(1, k / 2);
  RC_TAG(thin ? "thin shard: refused" : "sharded = whole", ranks == 1 ? "1 rank" : "several ranks");
  RC_LOG() << to_descriptor(p) << " over " << ranks << " rank(s), slabs " << to_string(slabs) << ", fill "
           << fill_string(fill) << "\n";

  // The first `ranks` ranks run it; the others only join the verdict.
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, me < ranks ? 0 : MPI_UNDEFINED, me, &comm);
  bool ok = true;
  std::string evidence;
  if (comm != MPI_COMM_NULL) {
    if (thin) {
      try {
        const LocalOp op = test::reference_op();
        const kernels::Support s = route(comm, p, slabs, op);
        ok = !s.ok && s.reason.find("thin shard") != std::string::npos;
        evidence = "route on a thin sharding: " + (s.ok ? std::string("accepted") : s.reason);
      } catch (const std::exception& e) {
        ok = false;
        evidence = e.what();
      }
    } else {
      const LocalOp op = test::kernels_or_reference(comm, p, slabs, GnStats::per_shard);
      RC_CLASSIFY(op.name == "kernels", "production kernels");
      const test::Verdict v = test::sharded_vs_whole(comm, p, slabs, fill, GnStats::per_shard, op);
      ok = v.ok;
      evidence = v.evidence;
    }
    MPI_Comm_free(&comm);
  }
  const bool all = agreed(ok);
  RC_LOG() << evidence;
  RC_ASSERT(all);
}

}  // namespace
}  // namespace kgate::sharded
