// The device reference for gfx942 (the compile gate, `kgate isa`): the same
// source as the host and CUDA builds.
#include "reference/device/devref.cpp"
