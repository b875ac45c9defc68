#include "kernels/conformance/main.cpp"
