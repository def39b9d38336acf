// Steps that meet a NaN weight on the CPU stop with an error naming where, which sequence and
// which position (tests/support/non_finite_cases.h; the GPU suite runs the same cases).
#include <gtest/gtest.h>

#include "support/non_finite_cases.h"

namespace qwenrt {
namespace {

TEST(NonFiniteSteps, NameTheLayerSequenceAndPositionOnTheCpu) { test::expect_non_finite_errors("cpu"); }

}  // namespace
}  // namespace qwenrt
