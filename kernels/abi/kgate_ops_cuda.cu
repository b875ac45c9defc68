// kgate's C ABI on the CUDA backend (libkgate_ops_cuda.so): kgate_ops.cpp
// through nvcc, over the kernels of kgate_kernels_cuda.
#include "kernels/abi/kgate_ops.cpp"
