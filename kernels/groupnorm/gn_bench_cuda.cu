// The CUDA build of gn_bench: the production kernels, the kernel API and the
// driver in one nvcc translation unit (same sources as the host build).
#include "kernels/api.cpp"
#include "kernels/conv3d/conv3d.cpp"
#include "kernels/groupnorm/groupnorm.cpp"
#include "kernels/groupnorm/gn_bench.cpp"
