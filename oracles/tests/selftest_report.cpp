// Prints the oracle's three self-test tables: false alarms, planted defects,
// tightness. Usage: oracle_selftest_report [--quick]
#include <cstring>
#include <iostream>

#include "oracles/sim/selftest.hpp"

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const auto campaign = kgate::sim::run_false_alarm_campaign(quick);
  std::cout << kgate::sim::format_false_alarms(campaign) << "\n";
  const auto defects = kgate::sim::run_defect_campaign();
  std::cout << kgate::sim::format_defects(defects) << "\n";
  std::cout << kgate::sim::format_tightness(campaign);
  bool ok = campaign.total_failures == 0;
  for (const auto& d : defects) ok = ok && d.ok;
  return ok ? 0 : 1;
}
