// Compensated arithmetic: error-free transformations and the Dot2 sum,
// round-to-nearest, no contraction (every kgate build compiles with
// -ffp-contract=off, nvcc with --fmad=false). Host and device code (KGATE_HD):
// the device reference (reference/device/) sums with exactly these functions
// in the host references' term order, so its results are the host Dot2
// reference's, bit for bit.
#pragma once

#include <cmath>

#include "reference/host_device.hpp"

namespace kgate::ref {

// Whether d is finite (not +-Inf or NaN): d - d is 0 exactly then, NaN
// otherwise. The same test on the host and on a device compiler.
KGATE_HD inline bool finite(double d) { return d - d == 0.0; }

KGATE_HD inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
// a*b = p + e exactly. e = fma(a, b, -p) where there is a hardware FMA (a GPU;
// a host compiled with -mfma), else Dekker's product on Veltkamp's split,
// since std::fma would be a slow software routine. Every form gives the same
// e: it is exact unless |a| or |b| >= 2^996 or the error underflows (|a*b| <
// 2^-969), far outside the values kgate references see (check_range refuses
// such fills).
KGATE_HD inline void two_prod(double a, double b, double& p, double& e) {
  p = a * b;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  e = ::fma(a, b, -p);
#elif defined(__FMA__)
  e = std::fma(a, b, -p);
#else
  constexpr double kSplit = 134217729.0;  // 2^27 + 1
  double t = kSplit * a;
  const double ah = t - (t - a), al = a - ah;
  t = kSplit * b;
  const double bh = t - (t - b), bl = b - bh;
  e = (((ah * bh - p) + ah * bl) + al * bh) + al * bl;
#endif
}

// Dot2 of Ogita, Rump and Oishi (2005): a sum of products (and plain terms)
// computed as if in twice the working precision, then rounded once.
struct Dot2 {
  double s = 0.0, c = 0.0;
  KGATE_HD void add_prod(double a, double b) {
    double p, ep, t, es;
    two_prod(a, b, p, ep);
    two_sum(s, p, t, es);
    s = t;
    c += ep + es;
  }
  KGATE_HD void add(double a) {
    double t, es;
    two_sum(s, a, t, es);
    s = t;
    c += es;
  }
  // Another Dot2's sum added to this one (its value and its error term).
  KGATE_HD void merge(const Dot2& o) {
    add(o.s);
    c += o.c;
  }
  // Once s is Inf or NaN (an infinite term, or an overflow) the error terms
  // are NaN (inf - inf) and meaningless: the value is the IEEE sum, s.
  KGATE_HD double value() const { return finite(s) ? s + c : s; }
};

}  // namespace kgate::ref
