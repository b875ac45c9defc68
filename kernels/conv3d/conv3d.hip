#include "kernels/conv3d/conv3d.cpp"
