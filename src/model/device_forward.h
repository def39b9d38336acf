#pragma once
// The forward pass on an accelerator. Qwen35Model validates the step, lays out the rows and
// books the cache (shared by every backend); an executor of this interface then runs the layers
// where its weights live. The CPU path needs none (it runs in Qwen35Model itself).
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "cache/model_cache.h"
#include "model/config.h"
#include "model/step.h"
#include "model/weights.h"

namespace qwenrt {

class DeviceForward {
 public:
  virtual ~DeviceForward() = default;
  // Logits as Qwen35Model::forward returns them, into `logits` (its storage reused across calls).
  // The cache's slots have been extended already.
  virtual void forward(const Step& step, const RowLayout& layout, ModelCache& cache, std::vector<float>& logits) = 0;
  // The same step keeping only each wanted row's argmax, enqueued without waiting for it
  // (Qwen35Model::submit_argmax: at most two in flight, forward only with none).
  virtual void submit_argmax(const Step& step, const RowLayout& layout, ModelCache& cache) = 0;
  // Waits for the oldest submitted step and gives its picks.
  virtual void collect_argmax(std::vector<int32_t>& tokens) = 0;
  virtual std::string describe() const = 0;  // device name, memory used
};

// Uploads the weights to `device` (a progress bar on stderr when it is a terminal) and returns
// its executor; Error when the build, the GPU or its memory cannot run this model.
std::shared_ptr<DeviceForward> make_device_forward(const DeviceSpec& device, const ModelConfig& config, const ModelWeights& weights);

}  // namespace qwenrt
