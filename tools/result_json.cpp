#include "tools/result_json.hpp"

#include <cmath>
#include <limits>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"

namespace kgate::gate {

namespace {

using nlohmann::json;

// oracle's jnum in reverse: a number, or "nan", "inf", "-inf".
double num(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();  // a non-finite double dumped by nlohmann
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  throw InputError("report", "expected a number, got " + j.dump());
}

std::vector<oracle::WorstElement> worst(const json& a) {
  std::vector<oracle::WorstElement> w;
  for (const auto& e : a)
    w.push_back({e.at("index").get<std::int64_t>(), e.at("coord").get<Dims>(), num(e.at("reference")),
                 num(e.at("candidate")), num(e.at("bound")), num(e.at("margin"))});
  return w;
}

oracle::TierResult tier(const json& j) {
  oracle::TierResult t;
  t.state = state_from_name(j.at("state").get<std::string>());
  t.reason = j.at("reason").get<std::string>();
  t.checked = j.at("checked").get<std::int64_t>();
  t.excluded = j.at("excluded").get<std::int64_t>();
  t.violations = j.at("violations").get<std::int64_t>();
  t.max_margin = num(j.at("max_margin"));
  t.worst = worst(j.at("worst"));
  return t;
}

}  // namespace

oracle::State state_from_name(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(oracle::State::invalid); ++i)
    if (oracle::name(static_cast<oracle::State>(i)) == s) return static_cast<oracle::State>(i);
  throw InputError("state", "unknown state '" + s + "'");
}

oracle::Report report_from_json(const json& j) {
  oracle::Report r;
  r.what = j.at("what").get<std::string>();
  r.state = state_from_name(j.at("state").get<std::string>());
  r.descriptor = j.at("descriptor").get<std::string>();
  r.fill = j.at("fill").get<std::string>();
  r.plan = j.at("plan").get<std::string>();
  r.numel = j.at("numel").get<std::int64_t>();
  r.depth = j.at("depth").get<std::int64_t>();
  r.u_acc = num(j.at("u_acc"));
  r.u_out = num(j.at("u_out"));
  r.lambda = num(j.at("lambda"));
  r.tier1 = tier(j.at("tier1"));
  r.tier2 = tier(j.at("tier2"));
  r.tier3 = tier(j.at("tier3"));
  const json& s = j.at("stats");
  r.stats = {num(s.at("max_scaled")),        num(s.at("rms_scaled")), num(s.at("mean_signed_scaled")),
             num(s.at("mean_signed_error")), num(s.at("max_abs_error")), s.at("count").get<std::int64_t>()};
  const json& t = j.at("trust");
  r.trust = {state_from_name(t.at("state").get<std::string>()), num(t.at("ref_zero_fraction")),
             num(t.at("cand_zero_fraction")), num(t.at("relu_clamped_fraction")),
             t.at("proves_nothing").get<bool>(), t.at("reason").get<std::string>()};
  const json& n = j.at("nan_inf");
  r.specials = {state_from_name(n.at("state").get<std::string>()), n.at("nan_mismatch").get<std::int64_t>(),
                n.at("inf_mismatch").get<std::int64_t>(), n.at("first_index").get<std::int64_t>(),
                worst(n.at("examples"))};
  return r;
}

Result result_from_json(const json& j) {
  Result r;
  r.descriptor = j.at("descriptor").get<std::string>();
  r.op = j.at("op").get<std::string>();
  r.dtype = j.at("dtype").get<std::string>();
  r.state = state_from_name(j.at("state").get<std::string>());
  r.reason = j.at("reason").get<std::string>();
  r.plan = j.at("plan").get<std::string>();
  r.worst_margin = num(j.at("worst_margin"));
  r.seconds = num(j.at("seconds"));
  if (j.contains("reference")) r.reference = j.at("reference").get<std::string>();
  if (j.contains("target")) r.target = j.at("target").get<std::string>();
  // The repro line as the rank that ran it wrote it (its runner's and its
  // references' flags included).
  if (j.contains("repro")) r.repro_line = j.at("repro").get<std::string>();
  std::vector<std::string> order;
  try {
    for (const auto& s : outputs(parse_descriptor(r.descriptor))) order.emplace_back(name(s.role));
  } catch (const InputError&) {
    // an invalid problem has no fills to order
  }
  for (const auto& f : j.at("fills")) {
    FillResult fr;
    fr.fill = fill_from_json(f.at("fill"));
    fr.state = state_from_name(f.at("state").get<std::string>());
    fr.detail = f.at("detail").get<std::string>();
    fr.digest = f.at("digest").get<std::string>();
    fr.worst_margin = num(f.at("worst_margin"));
    if (f.contains("phase_seconds"))
      for (auto it = f.at("phase_seconds").begin(); it != f.at("phase_seconds").end(); ++it)
        fr.phase_seconds[it.key()] = num(it.value());
    const json& outs = f.at("outputs");
    for (const std::string& role : order)
      if (outs.contains(role)) fr.roles.push_back({role, report_from_json(outs.at(role))});
    for (auto it = outs.begin(); it != outs.end(); ++it)
      if (std::find(order.begin(), order.end(), it.key()) == order.end())
        fr.roles.push_back({it.key(), report_from_json(it.value())});
    r.fills.push_back(std::move(fr));
  }
  return r;
}

}  // namespace kgate::gate
