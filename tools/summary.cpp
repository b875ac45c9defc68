#include "tools/summary.hpp"

#include "tools/gate.hpp"

namespace kgate {

void Tally::add(oracle::State s) {
  if (gate::is_failure(s)) ++failed;
  else if (s == oracle::State::unimplemented) ++unimplemented;
  else if (s == oracle::State::skipped) ++skipped;
  else ++passed;
}

std::string Tally::verdict(bool require_all) const {
  if (failed > 0 || (require_all && (not_verified() > 0 || total() == 0))) return "failed";
  return not_verified() > 0 || total() == 0 ? "incomplete" : "passed";
}

int Tally::exit_code(bool require_all) const {
  const std::string v = verdict(require_all);
  return v == "failed" ? exit_failed : v == "incomplete" ? exit_incomplete : exit_passed;
}

std::string Tally::summary_line(bool require_all) const {
  const std::string n = std::to_string(total());
  const std::string unverified = std::to_string(not_verified()) + " not verified (" + std::to_string(unimplemented) +
                                 " unimplemented, " + std::to_string(skipped) + " skipped)";
  if (failed > 0)
    return "FAILED: " + std::to_string(failed) + " of " + n + " checks failed, " + std::to_string(passed) +
           " passed, " + unverified;
  if (total() == 0)
    return std::string(require_all ? "FAILED" : "INCOMPLETE") +
           ": nothing was checked (no problem or entry was selected)" + (require_all ? ", and --require-all is set" : "");
  if (not_verified() > 0 && require_all)
    return "FAILED: " + unverified + " of " + n + " checks, and --require-all is set; " + std::to_string(passed) +
           " passed";
  if (not_verified() > 0)
    return "INCOMPLETE: nothing failed, but only " + std::to_string(passed) + " of " + n + " checks were verified; " +
           unverified;
  return "OK: all " + n + " checks passed";
}

}  // namespace kgate
