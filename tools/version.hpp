// kgate's version line: "kgate 0.1.0 (git abc1234) backend: host; also built: ...".
// The git revision is read at build time (tools/version.cpp.in, cmake/version.cmake).
#pragma once

#include <string>

namespace kgate {

std::string version_string();

}  // namespace kgate
