// The production kernels and the kernel API through nvcc (the CUDA backend):
// the same sources as the host library kgate_kernels_host, one translation
// unit. Linked by kgate_cuda (tools/).
#include "kernels/api.cpp"
#include "kernels/conv3d/conv3d.cpp"
#include "kernels/conv3d/conv_plan.cpp"
#include "kernels/conv3d/conv_boundary.cpp"
#include "kernels/groupnorm/groupnorm.cpp"
