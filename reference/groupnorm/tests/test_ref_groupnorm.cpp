#include <gtest/gtest.h>
#include "reference/groupnorm/ref_groupnorm.hpp"
namespace kgate::ref { TEST(G, Compiles) {} }
