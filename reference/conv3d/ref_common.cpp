#include "reference/conv3d/ref_common.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "reference/conv3d/ref_isa.hpp"
#include "reference/error.hpp"

namespace kgate::ref {

std::string_view name(Impl impl) {
  switch (impl) {
    case Impl::direct: return "direct";
    case Impl::fast: return "fast";
    case Impl::mpfr: return "mpfr";
    case Impl::dot2: return "dot2";
  }
  return "?";
}

std::optional<Impl> parse_impl(std::string_view s) {
  for (Impl i : {Impl::direct, Impl::fast, Impl::mpfr, Impl::dot2})
    if (name(i) == s) return i;
  return std::nullopt;
}

Inputs refs(const Outputs& m) {
  Inputs r;
  for (const auto& [role, t] : m) r.emplace(role, std::cref(t));
  return r;
}

void check_inputs(const std::vector<TensorSpec>& specs, const Inputs& in, const std::string& what) {
  for (const auto& s : specs) {
    const auto it = in.find(s.role);
    const std::string f(kgate::name(s.role));
    if (it == in.end()) throw InputError(f, what + " needs input '" + f + "'");
    if (it->second.get().dims() != s.dims)
      throw InputError(f, what + ": input '" + f + "' has shape " + dims_string(it->second.get().dims()) +
                              ", expected " + dims_string(s.dims));
  }
}

const Tensor& at(const Inputs& in, Role r) {
  const auto it = in.find(r);
  if (it == in.end()) throw InputError(std::string(kgate::name(r)), "missing input");
  return it->second.get();
}

void check_mpfr_size(double terms, const std::string& what) {
  if (terms > static_cast<double>(kMpfrMaxTerms))
    throw InputError("impl", "the mpfr reference is for small problems: " + what + " needs " +
                                 std::to_string(static_cast<std::int64_t>(terms)) + " terms, the limit is " +
                                 std::to_string(kMpfrMaxTerms) + "; use --impl fast or dot2");
}

// ---------------------------------------------------------------------------

namespace {

// dst[i] = conv(src[i]) for i < count. The source and destination do not
// overlap, and the fixed-length inner loop is unrolled and vectorized at -O2.
template <class T, class Conv>
void convert_run(const T* __restrict src, std::int64_t count, double* __restrict dst, Conv conv) {
  constexpr std::int64_t kLanes = 8;
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) dst[i + l] = conv(src[i + l]);
  for (; i < count; ++i) dst[i] = conv(src[i]);
}

// All of t as doubles into dst (t.numel() of them), threaded.
void load_all(const Tensor& t, double* dst) {
  constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  const std::int64_t n = t.numel();
  parallel_for((n + kChunk - 1) / kChunk, [&](std::int64_t c, int) {
    const std::int64_t lo = c * kChunk, cnt = std::min(kChunk, n - lo);
    load_run(t, lo, cnt, dst + lo);
  });
}

}  // namespace

void load_run(const Tensor& t, std::int64_t offset, std::int64_t count, double* dst) {
  const unsigned char* base = static_cast<const unsigned char*>(t.data());
  switch (t.dtype()) {
    case DType::fp64:
      std::memcpy(dst, base + offset * 8, static_cast<std::size_t>(count) * 8);
      return;
    case DType::fp32:
      convert_run(reinterpret_cast<const float*>(base) + offset, count, dst, [](float v) { return v; });
      return;
    case DType::bf16:
      convert_run(reinterpret_cast<const std::uint16_t*>(base) + offset, count, dst, bf16_bits_to_fp32);
      return;
    case DType::fp16: {
      const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(base) + offset;
      for (std::int64_t i = 0; i < count; ++i) dst[i] = fp16_bits_to_fp32(p[i]);
      return;
    }
  }
}

F64Vector to_f64(const Tensor& t) {
  F64Vector v(static_cast<std::size_t>(t.numel()));
  load_all(t, v.data());
  return v;
}

Tensor f64_copy(const Tensor& t) {
  Tensor c(DType::fp64, t.dims(), Tensor::Unfilled{});
  load_all(t, c.as<double>());
  return c;
}

Tensor abs_of(const Tensor& t) {
  Tensor a(t.dtype(), t.dims());
  const std::size_t es = size_of(t.dtype());
  const auto* src = static_cast<const unsigned char*>(t.data());
  auto* dst = static_cast<unsigned char*>(a.data());
  std::memcpy(dst, src, static_cast<std::size_t>(t.nbytes()));
  // Clear the sign bit (the top bit of the last byte, little-endian).
  for (std::int64_t i = 0; i < t.numel(); ++i) dst[static_cast<std::size_t>(i + 1) * es - 1] &= 0x7f;
  return a;
}

Tensor f64_like(const Dims& dims) { return Tensor(DType::fp64, dims); }

// ---------------------------------------------------------------------------

int ref_threads() {
  detail::require_ref_isa();  // links the start-up ISA check into every user
  if (const char* e = std::getenv("KGATE_REF_THREADS")) {
    const std::string v(e);
    const bool digits = !v.empty() && v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(v) : 0;
    if (n < 1 || n > kMaxRefThreads)
      throw InputError("environment", "KGATE_REF_THREADS='" + v + "' is not valid: allowed values are an integer 1.." +
                                          std::to_string(kMaxRefThreads));
    return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

void parallel_for(std::int64_t n, const std::function<void(std::int64_t, int)>& f) {
  if (n <= 0) return;
  const int nt = static_cast<int>(std::min<std::int64_t>(ref_threads(), n));
  if (nt == 1) {
    for (std::int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::exception_ptr err;
  std::mutex mu;
  auto body = [&](int worker) {
    try {
      for (std::int64_t i; (i = next.fetch_add(1)) < n;) f(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      if (!err) err = std::current_exception();
      next.store(n);
    }
  };
  std::vector<std::thread> ts;
  for (int w = 1; w < nt; ++w) ts.emplace_back(body, w);
  body(0);
  for (auto& t : ts) t.join();
  if (err) std::rethrow_exception(err);
}

// ---------------------------------------------------------------------------

std::optional<ExpRange> exp_range(const Tensor& t) {
  std::optional<ExpRange> r;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (v == 0.0 || !std::isfinite(v)) continue;
    const int e = std::ilogb(v);
    if (!r) r = ExpRange{e, e};
    r->lo = std::min(r->lo, e);
    r->hi = std::max(r->hi, e);
  }
  return r;
}

mpfr_prec_t exact_precision(std::optional<ExpRange> ea, std::optional<ExpRange> eb, std::optional<ExpRange> ec,
                            double terms) {
  int lo = 0, hi = 0;
  bool any = false;
  if (ea && eb) {
    lo = ea->lo + eb->lo - 104;  // quantum of a product of two doubles
    hi = ea->hi + eb->hi + 2;    // |a*b| < 2^(ea.hi + eb.hi + 2)
    any = true;
  }
  if (ec) {
    lo = any ? std::min(lo, ec->lo - 52) : ec->lo - 52;
    hi = any ? std::max(hi, ec->hi + 1) : ec->hi + 1;
    any = true;
  }
  if (!any) return 64;
  const int log_terms = static_cast<int>(std::ceil(std::log2(terms + 2.0)));
  const long bits = static_cast<long>(hi) - lo + log_terms + 4;
  return static_cast<mpfr_prec_t>(std::clamp<long>(bits, 64, MPFR_PREC_MAX));
}

MpAcc::MpAcc(mpfr_prec_t prec) {
  mpfr_init2(acc_, prec);
  mpfr_init2(a_, 53);
  mpfr_init2(b_, 53);
  mpfr_set_zero(acc_, 1);
}
MpAcc::~MpAcc() {
  mpfr_clear(acc_);
  mpfr_clear(a_);
  mpfr_clear(b_);
}
void MpAcc::fma(double a, double b) {
  mpfr_set_d(a_, a, MPFR_RNDN);
  mpfr_set_d(b_, b, MPFR_RNDN);
  mpfr_fma(acc_, a_, b_, acc_, MPFR_RNDN);
}
void MpAcc::add(double a) {
  mpfr_set_d(a_, a, MPFR_RNDN);
  mpfr_add(acc_, acc_, a_, MPFR_RNDN);
}

}  // namespace kgate::ref
