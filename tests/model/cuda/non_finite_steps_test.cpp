// Steps that meet a NaN weight on the GPU stop with the CPU's error (tests/support/
// non_finite_cases.h): the norms and the argmax report to the step's health word, so a graph
// replay, a fused-norm decode row and a prompt window all say where it first appeared.
#include <gtest/gtest.h>

#include "backend/cuda/gpu_test_support.h"
#include "support/non_finite_cases.h"

namespace qwenrt {
namespace {

TEST(NonFiniteSteps, NameTheLayerSequenceAndPositionOnTheGpu) {
  QWENRT_REQUIRE_GPU();
  test::expect_non_finite_errors("cuda");
}

}  // namespace
}  // namespace qwenrt
