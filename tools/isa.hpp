// `kgate isa`: the static audit of the kernels' device code. One parser per
// target for the compiler's resource report and the generated code:
//   gfx942: clang's -Rpass-analysis=kernel-resource-usage remarks and the
//           ISA listing (VGPR, AGPR, SGPR, LDS, scratch, spills, occupancy,
//           MFMA instructions, floating-point atomics);
//   cuda:   ptxas -v (registers, spills, stack, shared memory) and the PTX
//           (atom/red on floating-point types).
// The checks: no floating-point atomic instruction, no scratch or spills, no
// dynamic stack, LDS / shared memory at most 64 KiB per workgroup.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kgate::isa {

struct KernelReport {
  std::string kernel;  // mangled
  std::string pretty;  // demangled
  long vgpr = -1, agpr = -1, sgpr = -1;  // cuda: registers in vgpr, agpr/sgpr -1 (none)
  long scratch = 0;                      // bytes per lane (gfx942) / stack frame bytes (cuda)
  long vgpr_spill = 0, sgpr_spill = 0;   // cuda: spill stores in vgpr_spill
  long lds = 0;                          // bytes per workgroup (static)
  long occupancy = -1;                   // waves per SIMD (gfx942); -1 unknown
  bool dynamic_stack = false;
  std::set<std::string> matrix_ops;      // v_mfma_* (gfx942), mma/wgmma (cuda)
  std::vector<std::string> float_atomics;  // offending instructions, as written
};

struct Finding {
  std::string kernel, check, message;
};

inline constexpr long kMaxLds = 64 * 1024;

std::string demangle(const std::string& mangled);

// gfx942: the remarks (compiler stderr) give one report per kernel;
// scan_gfx942_isa then attributes instructions of the ISA listing.
std::vector<KernelReport> parse_gfx942_remarks(const std::string& remarks);
void scan_gfx942_isa(const std::string& isa, std::vector<KernelReport>& kernels);
// Whether one gfx942 instruction mnemonic is a floating-point atomic.
bool is_gfx942_float_atomic(const std::string& mnemonic);

// cuda: ptxas -v output, then the PTX.
std::vector<KernelReport> parse_ptxas(const std::string& ptxas);
void scan_ptx(const std::string& ptx, std::vector<KernelReport>& kernels);
bool is_ptx_float_atomic(const std::string& instruction);

// Every check applies to every kernel, except that floating-point atomics
// are allowed outside production sources (the runtime's own test kernels
// exercise atomic_add_unordered, which exists for the negative controls),
// and that a reference source (`reference`: the device reference, fp64 sums
// over 64-bit geometry, not a production kernel) may spill scalar registers:
// those spills go to vector-register lanes, never to scratch, which stays a
// finding.
std::vector<Finding> check(const std::vector<KernelReport>& kernels, bool production = true, bool reference = false);

// Whether a finding fails the audit on `target`. Every finding does on
// gfx942 (the production target); on cuda, scratch (stack frame) and spills
// are reported but do not fail: ptxas spills a few registers in rarely used
// instantiations, and the MI300A's resource gate is gfx942's.
bool is_fatal(const Finding& f, const std::string& target);

// Whether a kernel source is production code: anything but the runtime's
// own test kernels (kernels/runtime/, kernels/conformance/).
bool is_production_source(const std::string& path);
// Whether a kernel source is a reference (under reference/: the device reference).
bool is_reference_source(const std::string& path);

std::string table(const std::string& title, const std::vector<KernelReport>& kernels);
nlohmann::json to_json(const KernelReport& k);

}  // namespace kgate::isa
