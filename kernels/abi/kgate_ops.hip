// kgate's C ABI compiled for gfx942 (the HIP backend's libkgate_ops_hip
// would be this file linked with the kernel library of conv3d.hip and
// groupnorm.hip). Here it is the ABI's gfx942 compile gate (`kgate isa`,
// CTest gfx942_kgate_ops): the kernels themselves are gated by their own
// sources, and there is no MI300A here to link and load the library on.
#include "kernels/abi/kgate_ops.cpp"
