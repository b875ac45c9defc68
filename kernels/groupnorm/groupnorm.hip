#include "kernels/groupnorm/groupnorm.cpp"
