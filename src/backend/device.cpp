#include "backend/device.h"

#include <charconv>

#include "core/error.h"
#ifdef QWENRT_HAVE_CUDA
#include "backend/cuda/runtime/cuda_device.h"
#endif

namespace qwenrt {

std::string DeviceSpec::name() const { return kind == Kind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

DeviceSpec parse_device(std::string_view text) {
  if (text == "cpu") return {};
  if (text == "cuda") return {DeviceSpec::Kind::Cuda, 0};
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && index < 1024)
      return {DeviceSpec::Kind::Cuda, index};
  }
  fail("--device: '", text, "' is not a device; use cpu, cuda or cuda:N");
}

bool cuda_backend_built() {
#ifdef QWENRT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

void require_device(const DeviceSpec& spec) {
  if (spec.kind == DeviceSpec::Kind::Cpu) return;
#ifdef QWENRT_HAVE_CUDA
  cuda::require_supported_device(spec.index);
#else
  fail("--device ", spec.name(),
       ": this qwenrt was built without the CUDA backend (rebuild with nvcc on the PATH "
       "or -DQWENRT_CUDA=ON); --device cpu works");
#endif
}

}  // namespace qwenrt
