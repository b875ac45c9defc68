// `kgate bitwise make|run`: the bitwise corpus's commands.
#pragma once

#include <string>

namespace kgate {

std::string bitwise_default_path();
// Writes the corpus (or, with check, proves the committed file is
// reproduced byte for byte; never modifies it). Exit code.
int bitwise_make(const std::string& path, bool check);
// Runs every entry's kernel and compares digests; a mismatch prints the
// descriptor, the fill and seed, and the first differing elements.
// Entries without a kernel are reported as unimplemented. Exit code; the
// counts are added to *passed / *failed / *unimplemented when given.
int bitwise_run(const std::string& path, bool quiet = false, int* passed = nullptr, int* failed = nullptr,
                int* unimplemented = nullptr);

}  // namespace kgate
