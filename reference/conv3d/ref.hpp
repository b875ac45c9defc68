// The operator references behind one entry point: dispatch over Problem, the
// absolute companion, derived inputs, and the file interface the command line
// (`kgate ref DESCRIPTOR --inputs DIR --impl direct|fast|mpfr|dot2 --out DIR`)
// calls. Per-operator contracts: ref_conv.hpp, ../groupnorm/ref_groupnorm.hpp;
// shared ones (Impl, Inputs, Outputs): ref_common.hpp.
#pragma once

#include <string>

#include "reference/conv3d/ref_common.hpp"
#include "reference/conv3d/ref_conv.hpp"
#include "reference/fill.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"

namespace kgate::ref {

// fp64 outputs, one per role of outputs(p).
Outputs run_reference(const Problem& p, const Inputs& in, Impl impl);

// The MPFR result rounded once to t (tensors of dtype t): the expected value
// of a kernel whose output dtype is t.
Outputs run_reference_mpfr_rounded(const Problem& p, const Inputs& in, DType t);

// The absolute companion per output role (conv: conv_abs with Impl::fast;
// GroupNorm: groupnorm_companion(..).abs).
Outputs abs_companion(const Problem& p, const Inputs& in);

// The derived inputs of p (GroupNorm backward: mean, rstd) computed from the
// others; empty for problems without derived inputs.
Outputs derived_inputs(const Problem& p, const Inputs& in, Impl impl = Impl::fast);

// Every input of p: the generated ones drawn from `fill`, the derived ones
// from derived_inputs (fast). The input set the gate and the bitwise corpus
// feed to both the kernel and the reference.
Outputs make_inputs(const Problem& p, const Fill& fill);

// Reads <inputs_dir>/<role>.npy for every input role of p (expected dtype =
// the spec's; a missing derived input is computed with derived_inputs), runs
// the reference, and writes <out_dir>/<role>.npy (fp64) for every output and
// <out_dir>/digests.json, each file atomically. out_dir is created.
// digests.json: {"problem": descriptor, "impl": name, "outputs": {role: digest
// of the fp64 tensor}, "dtype": "fp64"}. Throws InputError on bad input.
void run_reference_files(const Problem& p, const std::string& inputs_dir, Impl impl, const std::string& out_dir);

}  // namespace kgate::ref
