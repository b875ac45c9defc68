// Shared by the fuzz targets: the contract every target checks is "bad input
// is an InputError, never a crash, a hang, another exception or a wrong
// round trip". Anything else escapes to libFuzzer, which reports it.
#pragma once

#include <cstdio>
#include <cstdlib>

// Aborts with a message: a violated round-trip property is a finding.
#define KGATE_FUZZ_REQUIRE(cond)                                                        \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
