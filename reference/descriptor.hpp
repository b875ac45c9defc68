// The one-line problem descriptor: a corpus line, a CLI argument and the
// reproduction line of every failure report. Grammar (README "Descriptors"):
//
//   descriptor := opdir SP dtypes { SP field }
//   opdir      := conv3d.fwd | conv3d.bwd_data | conv3d.bwd_weight
//               | conv_transpose3d.fwd | conv_transpose3d.bwd_data
//               | conv_transpose3d.bwd_weight | groupnorm.fwd | groupnorm.bwd
//   dtypes     := src [":" dst [":" acc]]    (conv default dst = src, acc = fp32;
//                                            groupnorm default dst = fp32)
//   field      := key value | flag | key "=" word
//     n c k g          batch, input channels, output channels (conv), groups
//     d h w            spatial extent of x; h and w default to d
//     kd kh kw         kernel extent; kh and kw default to kd
//     s | sd sh sw     stride (all axes | one axis)
//     p | pd ph pw     padding; value "F" (both sides) or "F:B" (front:back)
//     dil | dild dilh dilw   dilation
//     op | opd oph opw       output padding (conv_transpose3d)
//     eps              GroupNorm epsilon
//     bias relu noaffine     flags
//     form=logical|halo|adapter   halo=D,H,W (planes per side)
//
// print() emits the canonical form (defaults omitted, per-axis keys only where
// axes differ); parse(print(p)) == p for every valid p.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "reference/problem.hpp"

namespace kgate {

// Throws InputError naming the token (field "descriptor") on a syntax error,
// and the problem's field on an invalid problem.
Problem parse_descriptor(std::string_view text);
// The canonical form of a descriptor's text when it parses, else nullopt: a
// corpus entry's descriptor may be any spelling of its problem (bare bf16,
// s1, fields in any order).
std::optional<std::string> canonical_descriptor(std::string_view text);
std::string to_descriptor(const Problem& p);
std::string to_descriptor(const ConvProblem& p);
std::string to_descriptor(const GroupNormProblem& p);

// Shortest decimal that parses back to the same double.
std::string format_double(double v);
// The inverse of format_double: the whole of `s` as a decimal double
// (std::from_chars: locale-independent, subnormals kept, "inf" and "nan"
// accepted for the caller to judge); nullopt when it is not one, or out of range.
std::optional<double> parse_double(std::string_view s);

}  // namespace kgate
