// Printing a Report: a short table for people, JSON for tools.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "oracles/oracle.hpp"
#include "reference/tensor.hpp"

namespace kgate::oracle {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string coord_string(const Dims& c) {
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? "," : "") + std::to_string(c[i]);
  return s + "]";
}

nlohmann::json jnum(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::json worst_json(const std::vector<WorstElement>& w) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : w)
    a.push_back({{"index", e.index}, {"coord", e.coord}, {"reference", jnum(e.reference)},
                 {"candidate", jnum(e.candidate)}, {"bound", jnum(e.bound)}, {"margin", jnum(e.margin)}});
  return a;
}

nlohmann::json tier_json(const TierResult& t) {
  return {{"state", std::string(name(t.state))}, {"reason", t.reason},        {"checked", t.checked},
          {"excluded", t.excluded},              {"violations", t.violations}, {"max_margin", jnum(t.max_margin)},
          {"worst", worst_json(t.worst)}};
}

}  // namespace

std::string to_table(const Report& r) {
  std::ostringstream o;
  o << r.what << ": " << name(r.state) << "\n";
  o << "  repro : " << r.descriptor << " | fill " << r.fill << "\n";
  o << "  plan  : " << r.plan << "  D=" << r.depth << " u_acc=" << num(r.u_acc) << " u_out=" << num(r.u_out);
  if (r.lambda > 0) o << " lambda=" << num(r.lambda);
  o << "\n";
  auto tier = [&](const char* label, const TierResult& t) {
    o << "  " << label << ": " << name(t.state);
    if (t.state != State::not_applicable)
      o << "  checked " << t.checked << (t.excluded ? " (excluded " + std::to_string(t.excluded) + ")" : "")
        << "  violations " << t.violations << "  max margin " << num(t.max_margin);
    if (!t.reason.empty()) o << "  (" << t.reason << ")";
    o << "\n";
  };
  tier("tier1 exact        ", r.tier1);
  tier("tier2 rigorous     ", r.tier2);
  tier("tier3 probabilistic", r.tier3);
  o << "  nan/inf: " << name(r.specials.state) << "  nan mismatch " << r.specials.nan_mismatch << "  inf mismatch "
    << r.specials.inf_mismatch << "\n";
  o << "  trust  : " << name(r.trust.state) << "  zeros ref " << num(r.trust.ref_zero_fraction) << " cand "
    << num(r.trust.cand_zero_fraction);
  if (r.trust.relu_clamped_fraction > 0) o << " relu-clamped " << num(r.trust.relu_clamped_fraction);
  if (!r.trust.reason.empty()) o << "  (" << r.trust.reason << ")";
  o << "\n";
  o << "  e/(u sqrt(D) A): max " << num(r.stats.max_scaled) << " rms " << num(r.stats.rms_scaled)
    << " signed mean " << num(r.stats.mean_signed_scaled) << "  mean(cand-ref) " << num(r.stats.mean_signed_error)
    << "\n";
  const TierResult& shown = r.tier1.state == State::failed ? r.tier1
                            : r.tier2.state == State::failed ? r.tier2
                            : r.tier3.state == State::failed ? r.tier3
                                                              : r.tier2;
  if (!shown.worst.empty()) {
    o << "  worst elements      coord                reference        candidate        bound            margin\n";
    for (const auto& w : shown.worst) {
      char line[256];
      std::snprintf(line, sizeof line, "    %-10lld %-20s %-16.9g %-16.9g %-16.6g %.4g\n",
                    static_cast<long long>(w.index), coord_string(w.coord).c_str(), w.reference, w.candidate, w.bound,
                    w.margin);
      o << line;
    }
  }
  return o.str();
}

nlohmann::json to_json(const Report& r) {
  return {{"what", r.what},
          {"state", std::string(name(r.state))},
          {"descriptor", r.descriptor},
          {"fill", r.fill},
          {"plan", r.plan},
          {"numel", r.numel},
          {"depth", r.depth},
          {"u_acc", r.u_acc},
          {"u_out", r.u_out},
          {"lambda", r.lambda},
          {"tier1", tier_json(r.tier1)},
          {"tier2", tier_json(r.tier2)},
          {"tier3", tier_json(r.tier3)},
          {"stats",
           {{"max_scaled", jnum(r.stats.max_scaled)},
            {"rms_scaled", jnum(r.stats.rms_scaled)},
            {"mean_signed_scaled", jnum(r.stats.mean_signed_scaled)},
            {"mean_signed_error", jnum(r.stats.mean_signed_error)},
            {"max_abs_error", jnum(r.stats.max_abs_error)},
            {"count", r.stats.count}}},
          {"trust",
           {{"state", std::string(name(r.trust.state))},
            {"ref_zero_fraction", r.trust.ref_zero_fraction},
            {"cand_zero_fraction", r.trust.cand_zero_fraction},
            {"relu_clamped_fraction", r.trust.relu_clamped_fraction},
            {"proves_nothing", r.trust.proves_nothing},
            {"reason", r.trust.reason}}},
          {"nan_inf",
           {{"state", std::string(name(r.specials.state))},
            {"nan_mismatch", r.specials.nan_mismatch},
            {"inf_mismatch", r.specials.inf_mismatch},
            {"first_index", r.specials.first_index},
            {"examples", worst_json(r.specials.examples)}}}};
}

}  // namespace kgate::oracle
