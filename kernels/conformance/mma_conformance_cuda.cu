#include "kernels/conformance/mma_conformance.cpp"
