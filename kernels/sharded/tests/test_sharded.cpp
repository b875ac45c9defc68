// The sharded operators under mpirun (2 ranks: configuration C, 4 ranks:
// configuration D), at reduced extents: the U-Net of the configuration with
// scale 4 and 8 stem channels, every distinct logical-form problem of one
// training step made whole again (D times the shard count) and run sharded
// against the whole volume (sharded_check.hpp). Each problem runs the
// production kernels when every rank's local problem has one, else the fp64
// reference as the local operator; the test prints which. Then the failure
// paths: one rank declining, a thin shard, a local run failing on one rank,
// ranks given different problems -- each an error on every rank, never a hang.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "corpus/unet.hpp"
#include "kernels/sharded/tests/sharded_check.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"

namespace kgate::sharded {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The configuration sharded over as many ranks as this run has, reduced.
corpus::Network reduced_network(std::string& name) {
  for (const auto& c : corpus::configurations())
    if (c.net.shards == world_size() && c.net.shards > 1) {
      name = c.name;
      corpus::Network n = c.net;
      n.scale = 4;
      n.bottleneck_dim = 2;
      n.stem_channels = 8;
      return n;
    }
  name.clear();
  return {};
}

// Every distinct logical-form problem of the network, whole again.
std::vector<Problem> whole_problems(const corpus::Network& net) {
  std::vector<Problem> out;
  std::set<std::string> seen;
  for (const auto& call : corpus::training_step(net)) {
    if (call.form != ShapeForm::logical) continue;
    Problem p = call.problem;
    if (auto* c = std::get_if<ConvProblem>(&p)) c->in[0] *= net.shards;
    else std::get<GroupNormProblem>(p).spatial[0] *= net.shards;
    if (seen.insert(to_descriptor(p)).second) out.push_back(p);
  }
  return out;
}

TEST(Sharded, ConfigurationMatchesTheWholeVolume) {
  std::string cfg;
  const corpus::Network net = reduced_network(cfg);
  if (cfg.empty()) GTEST_SKIP() << "no configuration shards over " << world_size() << " ranks";
  const auto problems = whole_problems(net);
  ASSERT_GT(problems.size(), 20u);
  std::map<std::string, std::array<int, 3>> summary;  // op/stats -> (problems, with kernels, bitwise elements>0)
  for (const Problem& p : problems) {
    const bool gn = std::holds_alternative<GroupNormProblem>(p);
    const Slabs slabs = even_slabs(gn ? std::get<GroupNormProblem>(p).spatial[0] : std::get<ConvProblem>(p).in[0],
                                   world_size());
    const Fill fill = gn ? parse_fill("signed", 3) : lattice_fill(p, 3);
    for (GnStats st : gn ? std::vector<GnStats>{GnStats::per_shard, GnStats::global}
                         : std::vector<GnStats>{GnStats::per_shard}) {
      const LocalOp op = test::kernels_or_reference(MPI_COMM_WORLD, p, slabs, st);
      const test::Verdict v = test::sharded_vs_whole(MPI_COMM_WORLD, p, slabs, fill, st, op);
      EXPECT_TRUE(v.ok) << v.evidence;
      EXPECT_GT(v.oracle_elements + v.bitwise_elements, 0) << v.evidence;
      const std::string key = op_dir_name(p) + (gn ? (st == GnStats::global ? " (global)" : " (per-shard)") : "");
      auto& row = summary[key];
      row[0]++;
      row[1] += op.name == "kernels";
      if (gn) {
        EXPECT_EQ(op.name, "kernels") << key << ": GroupNorm shards through the production kernels";
      }
      row[2] += v.bitwise_elements > 0;
    }
  }
  if (world_rank() == 0) {
    std::cout << "configuration " << cfg << " (" << world_size() << " ranks), reduced: scale " << net.scale
              << ", stem " << net.stem_channels << "\n  operator.direction               problems  kernels  bitwise\n";
    for (const auto& [k, r] : summary)
      std::cout << "  " << k << std::string(k.size() < 32 ? 32 - k.size() : 1, ' ') << r[0] << "\t   " << r[1]
                << "\t    " << r[2] << "\n";
  }
}

// The fp64 reference as local operator makes the sharded forward bit for
// bit the whole volume's on any fill (not only the exact lattice).
TEST(Sharded, ForwardIsBitwiseTheWholeVolumeOnRandomData) {
  const ConvProblem c = std::get<ConvProblem>(parse_descriptor("conv3d.fwd fp32 n2 c3 k4 d9 h3 w4 kd3 kh3 kw1 pd1 ph1 pw0"));
  const Slabs slabs = even_slabs(c.in[0], world_size());
  const test::Verdict v =
      test::sharded_vs_whole(MPI_COMM_WORLD, c, slabs, parse_fill("signed", 5), GnStats::per_shard, test::reference_op());
  EXPECT_TRUE(v.ok) << v.evidence;
  if (world_rank() == 0) {
    EXPECT_EQ(v.bitwise_elements, 2 * 9 * 3 * 4 * 4) << v.evidence;
  }
}

// The check itself fails when the adapter is wrong: a local operator that
// ignores the halo (zeros instead of the neighbours' planes) is caught.
TEST(Sharded, CheckCatchesAMissingHalo) {
  if (world_size() < 2) GTEST_SKIP();
  const ConvProblem c = std::get<ConvProblem>(parse_descriptor("conv3d.fwd fp32 n1 c2 k2 d8 h3 w3 kd3 p1"));
  LocalOp broken = test::reference_op();
  const auto run = broken.run;
  broken.run = [run](const Problem& p, const kernels::Plan& pl, const std::map<Role, const Tensor*>& in) {
    Tensor x = in.at(Role::x)->to(in.at(Role::x)->dtype());
    const std::int64_t plane = x.numel() / x.dims()[1];
    for (std::int64_t e = 0; e < plane; ++e) {
      x.set(e, 0.0);
      x.set(x.numel() - 1 - e, 0.0);
    }
    auto in2 = in;
    in2[Role::x] = &x;
    return run(p, pl, in2);
  };
  const test::Verdict v = test::sharded_vs_whole(MPI_COMM_WORLD, c, even_slabs(8, world_size()),
                                                 parse_fill("positive", 1), GnStats::per_shard, broken);
  EXPECT_FALSE(v.ok);
}

// The check fails when a boundary gradient is not returned.
TEST(Sharded, CheckCatchesAMissingBoundaryGradient) {
  if (world_size() < 2) GTEST_SKIP();
  const ConvProblem c = std::get<ConvProblem>(parse_descriptor("conv3d.bwd_data fp32 n1 c2 k2 d8 h3 w3 kd3 p1"));
  LocalOp broken = test::reference_op();
  const auto run = broken.run;
  broken.run = [run](const Problem& p, const kernels::Plan& pl, const std::map<Role, const Tensor*>& in) {
    auto out = run(p, pl, in);
    Tensor& dx = out.at(Role::dx);
    const std::int64_t plane = dx.numel() / dx.dims()[1];
    for (std::int64_t e = 0; e < plane; ++e) dx.set(e, 0.0);  // the front halo's gradient lost
    return out;
  };
  const test::Verdict v = test::sharded_vs_whole(MPI_COMM_WORLD, c, even_slabs(8, world_size()),
                                                 parse_fill("positive", 1), GnStats::per_shard, broken);
  EXPECT_FALSE(v.ok);
}

// Global statistics: the check fails when a rank finishes with its own
// slab's partials instead of the combined ones (per-shard statistics under
// the global name), and when the backward takes its slab's group size.
TEST(Sharded, CheckCatchesGlobalStatisticsThatAreNot) {
  if (world_size() < 2) GTEST_SKIP();
  const Problem fwd = parse_descriptor("groupnorm.fwd fp32 n1 c8 g2 d8 h3 w3");
  LocalOp own = production_kernels();
  own.gn_finish = [](const GroupNormProblem& p, const std::map<Role, const Tensor*>& in, const Tensor&,
                     std::int64_t whole) { return kernels::groupnorm_finish(p, in, kernels::groupnorm_partials(p, in), whole); };
  // A positive fill whose slabs differ in mean (values grow along D).
  EXPECT_FALSE(test::sharded_vs_whole(MPI_COMM_WORLD, fwd, even_slabs(8, world_size()), parse_fill("positive", 1),
                                      GnStats::global, own)
                   .ok);
  const Problem bwd = parse_descriptor("groupnorm.bwd fp32 n1 c8 g2 d8 h3 w3");
  LocalOp slab_size = production_kernels();
  slab_size.gn_finish = [](const GroupNormProblem& p, const std::map<Role, const Tensor*>& in, const Tensor& c,
                           std::int64_t) { return kernels::groupnorm_finish(p, in, c, p.group_size()); };
  EXPECT_FALSE(test::sharded_vs_whole(MPI_COMM_WORLD, bwd, even_slabs(8, world_size()), parse_fill("signed", 2),
                                      GnStats::global, slab_size)
                   .ok);
  // The same checks pass with the production phases.
  EXPECT_TRUE(test::sharded_vs_whole(MPI_COMM_WORLD, fwd, even_slabs(8, world_size()), parse_fill("positive", 1),
                                     GnStats::global, production_kernels())
                  .ok);
  EXPECT_TRUE(test::sharded_vs_whole(MPI_COMM_WORLD, bwd, even_slabs(8, world_size()), parse_fill("signed", 2),
                                     GnStats::global, production_kernels())
                  .ok);
}

// ---------------------------------------------------------------------------
// Failure paths: the same error on every rank, and the ranks still in step
// afterwards (the barrier at the end; a hang would trip the watchdog).

void expect_error_everywhere(const Problem& p, const Slabs& slabs, const LocalOp& op, const std::string& needle) {
  std::map<Role, Tensor> mine;
  const std::map<Role, Tensor> in = ref::make_inputs(p, parse_fill("signed", 1));
  bool thrown = false;
  std::string what;
  try {
    const int me = world_rank();
    std::map<Role, const Tensor*> ptr;
    for (const auto& s : inputs(p)) {
      if (is_activation(p, s.role) && me < slabs.ranks()) {
        const auto [a, b] = role_planes(p, s.role, slabs, me);
        mine.emplace(s.role, d_planes(in.at(s.role), a, b));
      } else {
        mine.emplace(s.role, in.at(s.role).to(in.at(s.role).dtype()));
      }
      ptr[s.role] = &mine.at(s.role);
    }
    (void)run(MPI_COMM_WORLD, p, slabs, ptr, op);
  } catch (const ShardError& e) {
    thrown = true;
    what = e.what();
  }
  EXPECT_TRUE(thrown) << "rank " << world_rank() << " did not fail";
  EXPECT_NE(what.find(needle), std::string::npos) << "rank " << world_rank() << ": " << what;
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(ShardedFailures, OneRankDeclines) {
  const int last = world_size() - 1;
  LocalOp op = test::reference_op();
  op.supported = [last](const Problem&) -> kernels::Support {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == last) return {false, "declined for the test"};
    return {};
  };
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c2 k2 d8 h3 w3 kd3 p1");
  const kernels::Support s = route(MPI_COMM_WORLD, p, even_slabs(8, world_size()), op);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.reason, "rank " + std::to_string(last) + ": declined for the test");
  expect_error_everywhere(p, even_slabs(8, world_size()), op, "rank " + std::to_string(last) + ": declined");
}

TEST(ShardedFailures, ThinShardIsAnErrorOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP();
  // k=5 needs 2 planes per slab; the last rank gets 1.
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(world_size()), 3);
  sizes.back() = 1;
  std::int64_t d = 0;
  for (auto s : sizes) d += s;
  const Problem p = parse_descriptor("conv3d.bwd_data bf16 n1 c2 k2 d" + std::to_string(d) + " h3 w3 kd5 p2");
  expect_error_everywhere(p, slabs_of_sizes(sizes), test::reference_op(), "thin shard: rank " + std::to_string(world_size() - 1));
  // An empty slab is thin for any kernel, k=1 included.
  sizes.back() = 0;
  sizes.front() += 1;
  const Problem q = parse_descriptor("conv3d.fwd bf16 n1 c2 k2 d" + std::to_string(d) + " h3 w3 kd1");
  expect_error_everywhere(q, slabs_of_sizes(sizes), test::reference_op(), "thin shard");
}

TEST(ShardedFailures, LocalRunFailingOnOneRankFailsEveryRank) {
  LocalOp op = test::reference_op();
  const auto run = op.run;
  op.run = [run](const Problem& p, const kernels::Plan& pl, const std::map<Role, const Tensor*>& in) {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) throw std::runtime_error("injected kernel failure");
    return run(p, pl, in);
  };
  const Problem p = parse_descriptor("conv3d.bwd_data bf16 n1 c2 k2 d8 h3 w3 kd3 p1");
  expect_error_everywhere(p, even_slabs(8, world_size()), op, "failed on rank 0: injected kernel failure");
}

TEST(ShardedFailures, RanksGivenDifferentProblemsDecline) {
  const Problem p = parse_descriptor(world_rank() == 0 ? "groupnorm.fwd bf16 n1 c8 g2 d8 h3 w3"
                                                       : "groupnorm.fwd bf16 n1 c8 g4 d8 h3 w3");
  const kernels::Support s = route(MPI_COMM_WORLD, p, even_slabs(8, world_size()), test::reference_op());
  if (world_size() > 1) {
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.reason.find("different problems"), std::string::npos) << s.reason;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(ShardedFailures, UnsplittableProblemDeclines) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c2 k2 d8 h3 w3 kd3 s2 p1");
  expect_error_everywhere(p, even_slabs(8, world_size()), test::reference_op(), "stride 1");
}

}  // namespace
}  // namespace kgate::sharded
