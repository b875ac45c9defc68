// Shared pieces of the operator references (conv3d, conv_transpose3d,
// GroupNorm): the implementation selector, the input/output maps, operand
// loading, the thread pool, compensated and exact (MPFR) accumulators.
//
// Contract of every reference:
//   - inputs: Role -> tensor, every role of the problem's inputs() with the
//     spec's dims; the dtype is free (values are read exactly as double via
//     Tensor::get), so a test may hand fp64 statistics to GroupNorm backward.
//   - outputs: Role -> fp64 tensor for every role of outputs(), not rounded to
//     the problem's dst (the oracle rounds the expected value once).
//   - Impl::direct: fp64 loops that read like the definition.
//     Impl::fast:   fp64, blocked and threaded (Eigen GEMM for convolutions);
//                   results do not depend on the thread count.
//     Impl::mpfr:   exact accumulation; each fp64 output is the correctly
//                   rounded value (GroupNorm: see ref_groupnorm.hpp). Small
//                   problems only (InputError above kMpfrMaxTerms terms).
//     Impl::dot2:   compensated sums and products (Ogita-Rump-Oishi Dot2):
//                   |res - exact| <= u|exact| + gamma_n^2 * A (A = absolute
//                   companion), for when fp64 rounding itself would matter.
#pragma once

#include <mpfr.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "reference/compensated.hpp"
#include "reference/problem.hpp"
#include "reference/tensor.hpp"

namespace kgate::ref {

enum class Impl : std::uint8_t { direct, fast, mpfr, dot2 };
std::string_view name(Impl impl);
// "direct", "fast", "mpfr", "dot2".
std::optional<Impl> parse_impl(std::string_view s);

using Inputs = std::map<Role, std::reference_wrapper<const Tensor>>;
using Outputs = std::map<Role, Tensor>;

// A view of an owning map as references (convenience for callers).
Inputs refs(const Outputs& m);

// Throws InputError(field = role name) when a role of `specs` is missing or
// has other dims than its spec. `what` names the operator in the message.
void check_inputs(const std::vector<TensorSpec>& specs, const Inputs& in, const std::string& what);
const Tensor& at(const Inputs& in, Role r);

// The largest number of multiply-adds (or summed terms) the MPFR references
// accept; above it they throw InputError(field "impl").
inline constexpr std::int64_t kMpfrMaxTerms = std::int64_t{1} << 23;
void check_mpfr_size(double terms, const std::string& what);

// ---------------------------------------------------------------------------
// Operand loading

// Elements [offset, offset + count) of t as doubles (exact). The dtype switch
// is outside the element loop.
void load_run(const Tensor& t, std::int64_t offset, std::int64_t count, double* dst);
// All of t as doubles (threaded for large tensors), in host_alloc() memory
// (reference/host_memory.hpp: a large one reuses resident pages).
using F64Vector = LargeVector<double>;
F64Vector to_f64(const Tensor& t);
// All of t as an fp64 tensor, filled by the threads (so that a large one's
// pages are first touched by them).
Tensor f64_copy(const Tensor& t);
// |t| in t's dtype (exact: only the sign bit changes).
Tensor abs_of(const Tensor& t);
// An fp64 tensor with t's dims.
Tensor f64_like(const Dims& dims);

// ---------------------------------------------------------------------------
// Threads

// Worker count: KGATE_REF_THREADS if set, else hardware_concurrency. A
// KGATE_REF_THREADS that is not an integer in 1..kMaxRefThreads is an
// InputError naming it (never silently the default).
inline constexpr int kMaxRefThreads = 4096;
int ref_threads();

// Calls f(item, worker) for every item in [0, n) on up to ref_threads()
// threads, items handed out in increasing order by an atomic counter. f must
// only write state owned by its item (or by its worker index) so that results
// never depend on the thread count. Exceptions are rethrown on the caller.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t item, int worker)>& f);

// ---------------------------------------------------------------------------
// Exact accumulation in MPFR.

// Binary exponent range of the nonzero finite values of a tensor (ilogb), or
// nullopt when it has none.
struct ExpRange {
  int lo = 0, hi = 0;
};
std::optional<ExpRange> exp_range(const Tensor& t);

// Precision (bits) that makes every partial sum of `terms` products a*b exact,
// a from a tensor with exponent range ea and b from eb (each a double: 53-bit
// significand), plus an optional addend range ec (a bias): all products are
// integer multiples of 2^(ea.lo + eb.lo - 104) and bounded by terms * 2^(ea.hi
// + eb.hi + 2), so this many bits hold every partial sum exactly.
mpfr_prec_t exact_precision(std::optional<ExpRange> ea, std::optional<ExpRange> eb, std::optional<ExpRange> ec,
                            double terms);

// An MPFR accumulator: fma/add are exact when its precision comes from
// exact_precision for the terms it receives.
class MpAcc {
 public:
  explicit MpAcc(mpfr_prec_t prec);
  ~MpAcc();
  MpAcc(const MpAcc&) = delete;
  MpAcc& operator=(const MpAcc&) = delete;
  void zero() { mpfr_set_zero(acc_, 1); }
  void fma(double a, double b);  // acc += a*b
  void add(double a);            // acc += a
  mpfr_srcptr get() const { return acc_; }
  mpfr_ptr get() { return acc_; }

 private:
  mpfr_t acc_, a_, b_;
};

}  // namespace kgate::ref
