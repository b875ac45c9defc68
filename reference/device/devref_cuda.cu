// The device reference through nvcc (the CUDA backend): devref.cpp and its
// kernels, one translation unit. Linked by kgate_cuda.
#include "reference/device/devref.cpp"
