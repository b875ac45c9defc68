// Where kgate finds its data files (the committed corpora), independent of
// the build tree: KGATE_DATA_DIR when set; else <prefix>/share/kgate next to
// an installed kgate (found from the executable's own path); else the source
// tree the build came from.
#pragma once

#include <string>

namespace kgate::data {

// The path of a data file, e.g. path("corpus/shapes.json").
std::string path(const std::string& relative);

}  // namespace kgate::data
