// The bitwise corpus's GroupNorm entries: which outputs carry a digest, and
// the refusal of a backward entry that would not be exact.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "corpus/bitwise.hpp"
#include "reference/descriptor.hpp"

namespace kgate::corpus {
namespace {

std::set<Role> digested(const char* d) {
  std::set<Role> out;
  for (const auto& [r, h] : make_bitwise_entry(parse_descriptor(d)).digests) out.insert(r);
  return out;
}

TEST(BitwiseGroupNorm, DigestsCoverRstdWhenExactAndEveryBackwardOutput) {
  EXPECT_EQ(digested("groupnorm.fwd bf16 n1 c16 g4 d2"), (std::set<Role>{Role::y, Role::mean}));
  EXPECT_EQ(digested("groupnorm.fwd bf16 n1 c16 g4 d2 eps1.52587890625e-05"),
            (std::set<Role>{Role::y, Role::mean, Role::rstd}));
  // eps = 2^-15 is a power of two but not of 4: 1/sqrt(eps) is irrational.
  EXPECT_EQ(digested("groupnorm.fwd bf16 n1 c16 g4 d2 eps3.0517578125e-05"), (std::set<Role>{Role::y, Role::mean}));
  EXPECT_EQ(digested("groupnorm.bwd bf16 n1 c16 g4 d2 eps3"), (std::set<Role>{Role::dx, Role::dgamma, Role::dbeta}));
}

TEST(BitwiseGroupNorm, RefusesABackwardEntryThatIsNotExact) {
  // rstd of variance 1 with the default eps is not a power of two.
  EXPECT_THROW(make_bitwise_entry(parse_descriptor("groupnorm.bwd bf16 n1 c16 g4 d2")), std::logic_error);
  // A group of 4 * 27 elements: c2 = -A r^3 / M is not exact.
  EXPECT_THROW(make_bitwise_entry(parse_descriptor("groupnorm.bwd bf16 n1 c16 g4 d3 eps3")), std::logic_error);
}

TEST(BitwiseGroupNorm, TheCorpusHoldsBothDirectionsAndRstd) {
  bool bwd = false, rstd = false;
  for (const Problem& p : bitwise_problems()) {
    const auto* g = std::get_if<GroupNormProblem>(&p);
    if (!g) continue;
    bwd |= g->dir == GnDir::bwd;
    if (g->dir == GnDir::fwd) rstd |= make_bitwise_entry(p).digests.count(Role::rstd) > 0;
  }
  EXPECT_TRUE(bwd);
  EXPECT_TRUE(rstd);
}

}  // namespace
}  // namespace kgate::corpus
