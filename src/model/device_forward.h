#pragma once
// The forward pass on an accelerator. Qwen35Model validates the step, lays out the rows and books
// the cache (shared by every backend); an executor of this interface then runs the model's graph
// with the op set of its device, where its weights live. The CPU needs none (Qwen35Model runs the
// graph with CpuOps itself).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "cache/model_cache.h"
#include "model/config.h"
#include "model/qwen35_graph.h"
#include "model/step.h"
#include "model/weights.h"

namespace qwenrt {

class DeviceForward {
 public:
  virtual ~DeviceForward() = default;
  // Logits (and hidden rows) as Qwen35Model::forward returns them, into `out` (its storage reused
  // across calls). The cache's slots have been extended already.
  virtual void forward(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph, StepOutput& out) = 0;
  // One step of the MTP block (Qwen35Model::mtp_forward) against its own cache, as forward.
  virtual void mtp_forward(const Step& step, const RowLayout& layout, ModelCache& mtp_cache, const Qwen35Graph& graph, StepOutput& out) = 0;
  // The same step keeping only each wanted row's argmax, enqueued without waiting for it; returns
  // the step's entry for wait_argmax (Qwen35Model::enqueue_argmax: at most kMaxStepsInFlight).
  virtual int enqueue_argmax(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph) = 0;
  // Waits for the step of `entry` and gives its picks; the entry is free again.
  virtual void wait_argmax(int entry, std::vector<int32_t>& tokens) = 0;
  virtual std::string describe() const = 0;  // device name, memory used
  // Deterministic mode (Qwen35Model::set_deterministic).
  virtual void set_deterministic(bool on) = 0;
  // Device memory free now (after the weights and whatever steps have allocated): what a server
  // sizes its pools from.
  virtual std::size_t free_memory_bytes() const = 0;
};

// Uploads the weights to `device` (a progress bar on stderr when it is a terminal), records each
// weight's device copy in its `bound`, and returns the executor; Error when the build, the GPU or
// its memory cannot run this model.
std::shared_ptr<DeviceForward> make_device_forward(const DeviceSpec& device, const ModelConfig& config, ModelWeights& weights);

}  // namespace qwenrt
