#include "kernels/runtime/tests/test_util.hpp"
