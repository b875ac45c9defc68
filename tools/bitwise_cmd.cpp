#include "tools/bitwise_cmd.hpp"

#include <iomanip>
#include <iostream>

#include "corpus/bitwise.hpp"
#include "corpus/corpus_file.hpp"
#include "corpus/unet.hpp"
#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/npy.hpp"

namespace kgate {

std::string bitwise_default_path() { return std::string(KGATE_SOURCE_DIR) + "/corpus/bitwise.json"; }

int bitwise_make(const std::string& path, bool check) {
  std::vector<corpus::BitwiseEntry> entries;
  for (const Problem& p : corpus::bitwise_problems()) entries.push_back(corpus::make_bitwise_entry(p));
  return corpus::write_or_check(path, corpus::dump(corpus::bitwise_document(entries)), check,
                                "run `kgate bitwise make` to update it");
}

int bitwise_run(const std::string& path, bool quiet, int* n_passed, int* n_failed, int* n_unimpl) {
  const auto entries = corpus::load_bitwise(path);
  int passed = 0, failed = 0, unimpl = 0;
  for (const auto& e : entries) {
    if (!kernels::is_supported(e.problem)) {
      ++unimpl;
      continue;
    }
    const auto in = corpus::bitwise_inputs(e);
    std::map<Role, const Tensor*> ptr;
    for (const auto& [r, t] : in) ptr[r] = &t;
    const auto got = kernels::run(e.problem, kernels::plan(e.problem), ptr);
    bool ok = true;
    for (const auto& [role, want] : e.digests) {
      const std::string have = digest(got.at(role));
      if (have == want) continue;
      ok = false;
      std::cout << "bitwise mismatch: " << e.descriptor << " (" << name(role) << ")\n"
                << "  fill " << fill_string(e.fill) << " seed " << e.fill.seed << "\n"
                << "  expected " << want << " got " << have << "\n";
      // Rerun against the reference: the first differing elements.
      const auto expected = corpus::bitwise_expected(e.problem, in);
      const Tensor& x = expected.at(role);
      const Tensor& y = got.at(role);
      int shown = 0;
      for (std::int64_t i = 0; i < x.numel() && shown < 5; ++i) {
        const double a = x.get(i), b = y.get(i);
        if (a == b || (std::isnan(a) && std::isnan(b))) continue;
        std::cout << "  at " << dims_string(oracle::unravel(i, x.dims())) << " index " << i << ": expected "
                  << std::setprecision(9) << a << " got " << b << "\n";
        ++shown;
      }
      if (shown == 0)
        std::cout << "  the kernel equals the reference on every element: the committed digest is stale "
                     "(`kgate bitwise make` regenerates it)\n";
      std::cout << "  repro: kgate check '" << e.descriptor << "' --fill " << fill_string(e.fill) << " --seed "
                << e.fill.seed << "\n";
    }
    (ok ? passed : failed)++;
  }
  if (!quiet)
    std::cout << "bitwise: " << entries.size() << " entries, " << passed << " passed, " << failed << " failed, "
              << unimpl << " without a kernel\n";
  if (n_passed) *n_passed += passed;
  if (n_failed) *n_failed += failed;
  if (n_unimpl) *n_unimpl += unimpl;
  return failed ? 1 : 0;
}

}  // namespace kgate
