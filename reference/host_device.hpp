// KGATE_HD: a function the host and the device compilers (HIP, CUDA) both
// compile, for the reference pieces that the device reference shares with
// the host references and the kernels (rounding, term order, compensated
// sums). Empty for a host-only compiler.
#pragma once

#if defined(__HIPCC__) || defined(__CUDACC__)
#define KGATE_HD __host__ __device__
#else
#define KGATE_HD
#endif
