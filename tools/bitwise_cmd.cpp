#include "tools/bitwise_cmd.hpp"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <new>
#include <sstream>

#include "corpus/bitwise.hpp"
#include "corpus/corpus_file.hpp"
#include "corpus/unet.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/common.hpp"
#include "oracles/oracle.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/npy.hpp"
#include "tools/data.hpp"
#include "tools/gate.hpp"
#include "tools/summary.hpp"

namespace kgate {

std::string bitwise_default_path() { return data::path("corpus/bitwise.json"); }

std::string BitwiseResult::repro() const {
  return gate::command_prefix() + " check '" + descriptor + "' --fill " + fill + " --seed " + std::to_string(seed);
}

nlohmann::json BitwiseResult::to_json() const {
  return {{"descriptor", descriptor}, {"op", op}, {"fill", fill}, {"seed", seed}, {"state", oracle::name(state)},
          {"detail", detail}, {"seconds", seconds}, {"repro", repro()}};
}

int bitwise_make(const std::string& path, bool check) {
  std::vector<corpus::BitwiseEntry> entries;
  for (const Problem& p : corpus::bitwise_problems()) entries.push_back(corpus::make_bitwise_entry(p));
  return corpus::write_or_check(path, corpus::dump(corpus::bitwise_document(entries)), check,
                                "run `kgate bitwise make` to update it");
}

std::vector<BitwiseResult> bitwise_results(const std::string& path) { return bitwise_results(corpus::load_bitwise(path), std::cout); }

std::vector<BitwiseResult> bitwise_results(const std::vector<corpus::BitwiseEntry>& entries, std::ostream& log) {
  std::vector<BitwiseResult> results;
  for (const auto& e : entries) {
    const auto t0 = std::chrono::steady_clock::now();
    BitwiseResult r;
    r.descriptor = e.descriptor;
    r.op = op_dir_name(e.problem);
    r.fill = fill_string(e.fill);
    r.seed = e.fill.seed;
    if (!kernels::is_supported(e.problem)) {
      r.state = oracle::State::unimplemented;
      results.push_back(r);
      continue;
    }
    std::ostringstream out;
    try {
      const auto in = corpus::bitwise_inputs(e);
      std::map<Role, const Tensor*> ptr;
      for (const auto& [role, t] : in) ptr[role] = &t;
      const auto got = kernels::run(e.problem, kernels::plan(e.problem), ptr);
      for (const auto& [role, want] : e.digests) {
        const std::string have = digest(got.at(role));
        if (have == want) continue;
        r.state = oracle::State::failed;
        out << "bitwise mismatch: " << e.descriptor << " (" << name(role) << ")\n"
            << "  fill " << r.fill << " seed " << r.seed << "\n"
            << "  expected " << want << " got " << have << "\n";
        // Rerun against the reference: the first differing elements.
        const auto expected = corpus::bitwise_expected(e.problem, in);
        const Tensor& x = expected.at(role);
        const Tensor& y = got.at(role);
        int shown = 0;
        for (std::int64_t i = 0; i < x.numel() && shown < 5; ++i) {
          const double a = x.get(i), b = y.get(i);
          if (a == b || (std::isnan(a) && std::isnan(b))) continue;
          out << "  at " << dims_string(oracle::unravel(i, x.dims())) << " index " << i << ": expected "
              << std::setprecision(9) << a << " got " << b << "\n";
          ++shown;
        }
        if (shown == 0)
          out << "  the kernel equals the reference on every element: the committed digest is stale "
                 "(`kgate bitwise make` regenerates it)\n";
      }
    } catch (const std::bad_alloc&) {
      throw gate::RunError(e.descriptor + ": out of memory in the bitwise corpus; an error of the run, not a verdict");
    } catch (const rt::OutOfMemory& oom) {
      throw gate::RunError(e.descriptor + ": " + oom.what() + " in the bitwise corpus; an error of the run, not a verdict");
    } catch (const rt::Unavailable& ex) {
      throw gate::environment_error(ex.what());
    } catch (const std::exception& ex) {
      r.state = oracle::State::failed;
      out << "bitwise: " << e.descriptor << ": kernel run failed: " << ex.what() << "\n";
    }
    r.detail = out.str();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.state == oracle::State::failed) log << r.detail << "  repro: " << r.repro() << "\n" << std::flush;
    results.push_back(std::move(r));
  }
  return results;
}

int bitwise_run(const std::string& path, bool require_all) {
  const auto entries = corpus::load_bitwise(path);
  if (entries.empty()) std::cout << "bitwise: " << path << " has no entries: nothing to check\n";
  const auto results = bitwise_results(entries, std::cout);
  Tally t;
  for (const auto& r : results) t.add(r.state);
  std::cout << "bitwise: " << results.size() << " entries, " << t.passed << " passed, " << t.failed << " failed, "
            << t.unimplemented << " without a kernel\n";
  std::cout << t.summary_line(require_all) << "\n";
  return t.exit_code(require_all);
}

}  // namespace kgate
