// Prints the oracle's three self-test tables: false alarms, planted defects,
// tightness. Usage: oracle_selftest_report [--quick]
#include <cstring>
#include <iostream>

#include "oracles/sim/selftest.hpp"

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && std::strcmp(argv[1], "--quick") != 0)) {
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    (help ? std::cout : std::cerr) << "usage: oracle_selftest_report [--quick]\n"
                                      "  prints the oracle's self-test tables (false alarms, planted defects, "
                                      "tightness); exit 0 iff they pass\n";
    return help ? 0 : 2;
  }
  const bool quick = argc > 1;
  const auto campaign = kgate::sim::run_false_alarm_campaign(quick);
  std::cout << kgate::sim::format_false_alarms(campaign) << "\n";
  const auto defects = kgate::sim::run_defect_campaign();
  std::cout << kgate::sim::format_defects(defects) << "\n";
  std::cout << kgate::sim::format_tightness(campaign);
  bool ok = campaign.total_failures == 0;
  for (const auto& d : defects) ok = ok && d.ok;
  return ok ? 0 : 1;
}
