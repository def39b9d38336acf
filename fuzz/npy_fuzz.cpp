// libFuzzer target: arbitrary bytes as a .npy file image. Either an array whose value count is the
// product of its non-negative shape, or qwenrt::Error; any other exception or a crash is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  try {
    const qwenrt::NpyArray a = qwenrt::parse_npy(image, "fuzz.npy");
    uint64_t count = 1;
    for (int64_t d : a.shape) {
      if (d < 0) std::abort();
      count *= static_cast<uint64_t>(d);
    }
    if (a.shape.size() > qwenrt::kMaxNpyDims || count != a.values.size() || a.values.size() * 4 > size) std::abort();
  } catch (const qwenrt::Error&) {}
  return 0;
}
