#pragma once
// The Qwen 3.5 text decoder: embedding, L hybrid layers (Gated DeltaNet or gated attention, then
// SwiGLU MLP or MoE), final norm, head. One forward call runs one ragged Step against a cache.
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "backend/device.h"
#include "cache/model_cache.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/step.h"
#include "model/weights.h"

namespace qwenrt {

class CheckpointDir;
class DeviceForward;

// The column of the largest of n logits: the first of equal ones, NaN counting as −∞ (what greedy
// decoding picks, here and on the GPU).
int32_t argmax_row(const float* logits, int64_t n);

class Qwen35Model {
 public:
  Qwen35Model(ModelConfig config, ModelWeights weights, std::shared_ptr<const CheckpointDir> checkpoint = nullptr);

  // Loads and validates a Hugging Face checkpoint directory.
  static Qwen35Model load(const std::filesystem::path& dir);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Moves the forward pass to `device` (weights uploaded now); cpu keeps it here.
  void use_device(const DeviceSpec& device);
  const DeviceSpec& device() const { return device_; }
  std::string device_description() const;

  // A cache for this model where it runs (host tensors on the CPU, device tensors on a GPU).
  ModelCache new_cache(int max_sequences) const;

  // Runs one step; returns logits [rows, V] for every row (step.all_logits) or for the last row of
  // each sequence, in step order. Appends the rows to each sequence's cache.
  std::vector<float> forward(const Step& step, ModelCache& cache, ThreadPool& pool) const;
  // The same into `logits`, whose storage is reused from call to call.
  void forward(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const;
  // The same step keeping only the argmax of each of those rows (greedy decoding): on a GPU the
  // tokens are picked there and only they come back, not [rows, V] logits.
  void forward_argmax(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<int32_t>& tokens) const;

  // Greedy steps queued ahead of the host. submit_argmax validates and books a step like
  // forward_argmax and returns at once (on a GPU while the step runs; the CPU computes it there and
  // then); collect_argmax waits for the oldest submitted step and gives its picks. At most
  // kArgmaxInFlight steps are in flight; forward needs none. A decode step's sequence may take the
  // pick of a row of the step submitted just before (StepSequence::from_previous), so the host can
  // queue step k + 1 before it has seen step k's tokens.
  static constexpr int kArgmaxInFlight = 2;
  void submit_argmax(const Step& step, ModelCache& cache, ThreadPool& pool) const;
  void collect_argmax(std::vector<int32_t>& tokens) const;
  int argmax_in_flight() const { return static_cast<int>(in_flight_rows_.size()); }
  // Waits for and drops every step in flight (a generation that stops early or throws).
  void discard_argmax() const;

 private:
  RowLayout layout(const Step& step, const ModelCache& cache) const;
  void cpu_forward(const Step& step, const RowLayout& layout, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const;

  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const CheckpointDir> checkpoint_;  // keeps the mapped files alive
  std::vector<int> kind_index_;  // per layer: index among layers of its kind (cache addressing)
  DeviceSpec device_;
  std::shared_ptr<DeviceForward> device_forward_;  // null on the CPU
  // Submitted argmax steps: rows picked by each step in flight (oldest first), the row count of
  // the last one submitted (what from_previous may name) and, on the CPU, the picks themselves.
  mutable std::deque<int64_t> in_flight_rows_;
  mutable int64_t previous_rows_ = 0;
  mutable std::deque<std::vector<int32_t>> cpu_picks_;
};

}  // namespace qwenrt
