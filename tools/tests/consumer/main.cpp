// Uses the installed package: runs the fp64 reference on a small GroupNorm
// problem (signed fill, seed 1) and prints its digest, which must equal the
// installed `kgate ref`'s on the same inputs, and an oracle state's name.
#include <iostream>

#include "oracles/oracle.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"

int main() {
  using namespace kgate;
  const Problem p = parse_descriptor("groupnorm.fwd fp32 n1 c8 g2 d4");
  const auto in = ref::make_inputs(p, parse_fill("signed", 1));
  const auto out = ref::run_reference(p, ref::refs(in), ref::Impl::fast);
  std::cout << "y " << digest(out.at(Role::y)) << " " << oracle::name(oracle::State::passed) << "\n";
  return 0;
}
