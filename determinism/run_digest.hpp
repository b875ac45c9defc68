// Runs a production kernel on generated inputs and returns the digest of
// every output: the unit the determinism tests and audit compare.
#pragma once

#include <map>
#include <string>

#include "kernels/api.hpp"
#include "reference/fill.hpp"

namespace kgate::determinism {

// role name -> digest, for every output of p.
std::map<std::string, std::string> run_digests(const Problem& p, const Fill& fill,
                                               const kernels::RunOptions& opt = {});

// The inputs p needs: generated ones from `fill`, derived ones (GroupNorm
// backward's mean and rstd) from a forward run of the kernel itself, not the
// reference (ref::make_inputs), so that this library, which the CUDA build
// links, needs no reference operators.
std::map<Role, Tensor> make_inputs(const Problem& p, const Fill& fill);

}  // namespace kgate::determinism
