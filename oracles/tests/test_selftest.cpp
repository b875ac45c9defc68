// The oracle's worth: no false alarm on correct simulated kernels (full
// campaign: >= 10^4 comparisons, K up to 2^18), every planted defect caught
// by the named check.
#include <gtest/gtest.h>

#include "oracles/sim/selftest.hpp"

namespace kgate::sim {

TEST(OracleSelfTest, NoFalseAlarmsOnCorrectKernels) {
  const Campaign c = run_false_alarm_campaign(false);
  EXPECT_GE(c.total_cases, 10000);
  EXPECT_EQ(c.total_failures, 0) << format_false_alarms(c);
  EXPECT_LE(c.max_margin2, 1.0);
  EXPECT_LE(c.max_margin3, 1.0);
  EXPECT_EQ(c.max_margin1, 0.0);
  // Tier 3 judged every IEEE strategy of the long dot products.
  for (const auto& r : c.rows) {
    if (r.group.rfind("dot", 0) == 0 && r.strategy.rfind("mfma", 0) != 0) {
      EXPECT_GT(r.tier3_cases, 0) << r.group << " " << r.strategy;
    }
  }
  std::cout << format_false_alarms(c) << "\n" << format_tightness(c);
}

TEST(OracleSelfTest, EveryPlantedDefectIsCaughtByTheNamedCheck) {
  const auto d = run_defect_campaign();
  EXPECT_GE(d.size(), 11u);
  for (const auto& r : d) {
    EXPECT_TRUE(r.ok) << r.defect << " on " << r.input << ": expected " << r.expected << " to fail\n"
                      << oracle::to_table(r.report);
    EXPECT_FALSE(r.report.passed()) << r.defect;
  }
  std::cout << format_defects(d);
}

}  // namespace kgate::sim
