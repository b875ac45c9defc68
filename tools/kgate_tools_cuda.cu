// The backend halves of `kgate audit` and `kgate bench` through nvcc, for
// kgate_cuda (the host build compiles the same files with the C++ compiler).
#include "determinism/audit_env.cpp"
#include "tools/bench_device.cpp"
