// --device parsing and the checks behind it, on any machine (CI has no GPU).
#include "backend/device.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#ifdef QWENRT_HAVE_CUDA
#include "backend/cuda/runtime/cuda_device.h"
#endif

namespace qwenrt {
namespace {

TEST(Device, ParsesTheAcceptedForms) {
  EXPECT_EQ(parse_device("cpu").kind, DeviceSpec::Kind::Cpu);
  const DeviceSpec plain = parse_device("cuda");
  EXPECT_EQ(plain.kind, DeviceSpec::Kind::Cuda);
  EXPECT_EQ(plain.index, 0);
  const DeviceSpec third = parse_device("cuda:3");
  EXPECT_EQ(third.index, 3);
  EXPECT_EQ(third.name(), "cuda:3");
}

TEST(Device, RejectsAnythingElseNamingIt) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda:01a", "cuda:99999", "cpu:0", " cuda"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("use cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, CpuNeedsNothing) { EXPECT_NO_THROW(require_device(parse_device("cpu"))); }

// Without the backend or without a GPU, asking for one is an error saying why; a GPU ordinal past
// the last one is an error listing what is there.
TEST(Device, CudaWithoutTheMeansIsAClearError) {
  bool have_gpu = false;
#ifdef QWENRT_HAVE_CUDA
  have_gpu = cuda::device_count() > 0;
#endif
  if (!have_gpu) {
    try {
      require_device(parse_device("cuda"));
      ADD_FAILURE() << "cuda accepted without a GPU";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("built without the CUDA backend") != std::string::npos || msg.find("no CUDA GPU") != std::string::npos) << msg;
    }
  }
  EXPECT_THROW(require_device(parse_device("cuda:1000")), Error);
}

}  // namespace
}  // namespace qwenrt
