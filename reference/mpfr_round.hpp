// Correct rounding of an MPFR value to a kgate dtype, once, subnormals and
// overflow included. This is the ground truth the dtype conversions and the
// MPFR references are checked against.
#pragma once

#include <mpfr.h>

#include "reference/dtype.hpp"

namespace kgate {

// Returns x rounded to nearest-even in dtype t, as a double (exact).
inline double mpfr_round_to(mpfr_srcptr x, DType t) {
  int p = 0, emin = 0, emax = 0;  // IEEE normal exponent range
  switch (t) {
    case DType::fp64: p = 53; emin = -1022; emax = 1023; break;
    case DType::fp32: p = 24; emin = -126; emax = 127; break;
    case DType::bf16: p = 8; emin = -126; emax = 127; break;
    case DType::fp16: p = 11; emin = -14; emax = 15; break;
  }
  if (mpfr_nan_p(x)) return NAN;
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  // MPFR writes x = m * 2^e with 0.5 <= m < 1.
  mpfr_set_emin(emin - p + 2);
  mpfr_set_emax(emax + 1);
  mpfr_t y;
  mpfr_init2(y, p);
  int inex = mpfr_set(y, x, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const double r = mpfr_get_d(y, MPFR_RNDN);  // exact: y has <= 53 bits in range
  mpfr_clear(y);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return r;
}

inline double mpfr_round_double_to(double v, DType t) {
  mpfr_t x;
  mpfr_init2(x, 53);
  mpfr_set_d(x, v, MPFR_RNDN);
  const double r = mpfr_round_to(x, t);
  mpfr_clear(x);
  return r;
}

}  // namespace kgate
