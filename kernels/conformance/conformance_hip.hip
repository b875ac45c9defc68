#include "kernels/conformance/conformance.cpp"
