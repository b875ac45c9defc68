// kgate_conformance_<backend>: runs the conformance kernels on this binary's
// backend and prints one line per kernel with the XXH3-64 of its output, so
// runs on different backends and machines can be compared bit for bit. Also
// compares each output with the plain C++ computation on this machine's CPU.
// Exit status 0 iff every output matches.
//   usage: kgate_conformance_<backend> [scale]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "kernels/conformance/conformance.hpp"

int main(int argc, char** argv) {
  using namespace kgate::conformance;
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("usage: %s [SCALE]\n  runs the conformance kernels (problem size x SCALE, default 1), prints each "
                "output's XXH3-64 and whether it matches plain C++; exit 0 iff all match\n", argv[0]);
    return 0;
  }
  char* end = nullptr;
  const long scale_arg = argc > 1 ? std::strtol(argv[1], &end, 10) : 1;
  if (argc > 2 || (argc > 1 && (*end != '\0' || scale_arg < 1 || scale_arg > 1024))) {
    std::fprintf(stderr, "kgate_conformance: SCALE must be one integer in [1, 1024] (--help for usage)\n");
    return 2;
  }
  const int scale = static_cast<int>(scale_arg);
  try {
    const auto dev = run_device(scale);
    const auto cpu = run_plain_cpp(scale);
    bool ok = dev.size() == cpu.size();
    for (std::size_t i = 0; i < dev.size(); ++i) {
      const bool same = i < cpu.size() && dev[i].bytes == cpu[i].bytes;
      ok = ok && same;
      std::printf("backend=%s kernel=%-13s bytes=%-8zu xxh3=%s plain_cpp=%s %s\n", backend_name(),
                  dev[i].name.c_str(), dev[i].bytes.size(), digest_hex(dev[i].bytes).c_str(),
                  i < cpu.size() ? digest_hex(cpu[i].bytes).c_str() : "-", same ? "MATCH" : "DIFFER");
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgate_conformance: %s\n", e.what());
    return 2;
  }
}
