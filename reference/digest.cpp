#include "reference/digest.hpp"

#include <xxhash.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

namespace kgate {

std::string digest(const TensorView& t) {
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw std::bad_alloc();
  XXH3_128bits_reset(st);
  const std::string header = "kgate-digest-v1 " + std::string(name(t.dtype)) + " " + dims_string(t.dims) + "\n";
  XXH3_128bits_update(st, header.data(), header.size());
  const std::size_t es = size_of(t.dtype);
  if (t.contiguous()) {
    XXH3_128bits_update(st, t.data, static_cast<std::size_t>(t.numel()) * es);
  } else {
    // Hash in logical (row-major) order, one element at a time.
    std::vector<std::int64_t> idx(t.dims.size(), 0);
    const std::int64_t n = t.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const unsigned char*>(t.data) + t.offset(idx) * static_cast<std::int64_t>(es);
      XXH3_128bits_update(st, p, es);
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t.dims[d]) break;
        idx[d] = 0;
      }
    }
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

}  // namespace kgate
