// The oracle's self-test campaigns, shared by the CTest tests and the
// oracle_selftest_report executable that prints their tables.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oracles/oracle.hpp"
#include "oracles/sim/sim.hpp"

namespace kgate::sim {

// One row per (group, strategy): correct simulated kernels against the oracle.
struct FalseAlarmRow {
  std::string group;     // "conv3d.fwd", "dot(bwd_weight 1x1)", "groupnorm.fwd", ...
  std::string strategy;
  std::int64_t cases = 0, elements = 0, failures = 0;  // failures: reports not passed
  std::int64_t tier1_checked = 0, tier3_cases = 0;
  double max_margin2 = 0, max_margin3 = 0;
  std::vector<std::string> failure_examples;  // tables of the first failing reports
};

struct TightnessRow {
  std::string direction;
  std::string dtypes;  // "src->dst"
  std::int64_t cases = 0, mfma_cases = 0;
  // Largest e/bound seen (the ratio bound/max error is 1/margin), IEEE
  // strategies with fp32 partials, and MFMA cdna3 chunks (tier 2 only).
  double max_margin2 = 0, max_margin3 = 0, max_margin2_mfma = 0;
};

struct Campaign {
  std::vector<FalseAlarmRow> rows;
  std::vector<TightnessRow> tightness;
  std::int64_t total_cases = 0, total_elements = 0, total_failures = 0, degenerate_skipped = 0;
  // Cases whose every tier passed but whose comparison proves nothing (a
  // zero candidate would pass them too: TrustResult::proves_nothing). Not a
  // false alarm, and not a pass: the gate reports them untrusted.
  std::int64_t total_unprovable = 0;
  std::vector<std::string> unprovable_examples;
  double max_margin1 = 0, max_margin2 = 0, max_margin3 = 0;
};

// quick = true: a reduced campaign (for fast runs); false: the full one
// (>= 10^4 comparisons, K up to 2^18).
Campaign run_false_alarm_campaign(bool quick);

struct DefectRow {
  std::string defect, input, expected;  // expected: the tier named to catch it
  oracle::Report report;
  std::string caught_by;  // first failing of tier1, tier2, tier3, nan/inf ("" = missed)
  double margin = 0;      // max margin of the catching tier
  bool ok = false;        // the expected check failed
};
std::vector<DefectRow> run_defect_campaign();

std::string format_false_alarms(const Campaign& c);
std::string format_tightness(const Campaign& c);
std::string format_defects(const std::vector<DefectRow>& d);

}  // namespace kgate::sim
