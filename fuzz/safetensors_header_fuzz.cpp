// libFuzzer target: arbitrary bytes as a safetensors file image. Any input must either parse into
// tensors whose byte ranges lie inside the image, or raise qwenrt::Error; nothing else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  try {
    for (const auto& t : qwenrt::parse_safetensors(image, "fuzz.safetensors")) {
      if (t.data < image.data() || t.data + t.nbytes > image.data() + image.size()) std::abort();
      if (static_cast<std::size_t>(t.numel()) * qwenrt::dtype_size(t.dtype) != t.nbytes) std::abort();
    }
  } catch (const qwenrt::Error&) {}
  return 0;
}
