#include "model/device_forward.h"

#include "core/error.h"
#ifdef QWENRT_HAVE_CUDA
#include "model/cuda/cuda_forward.h"
#endif

namespace qwenrt {

std::shared_ptr<DeviceForward> make_device_forward(const DeviceSpec& device, const ModelConfig& config, ModelWeights& weights) {
  if (device.kind == DeviceSpec::Kind::Cpu) return nullptr;
#ifdef QWENRT_HAVE_CUDA
  return std::make_shared<CudaForward>(device.index, config, weights);  // checks the GPU itself
#else
  require_device(device);  // says the build has no CUDA backend
  fail("--device ", device.name(), ": this qwenrt was built without the CUDA backend");
#endif
}

}  // namespace qwenrt
