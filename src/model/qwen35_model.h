#pragma once
// A loaded Qwen 3.5 model where it runs: the validated config and weights, the graph written once
// (model/qwen35_graph), and the backend that runs it (the CPU here, or a device executor). One
// forward call runs one ragged Step against a cache.
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "backend/device.h"
#include "cache/model_cache.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/qwen35_graph.h"
#include "model/step.h"
#include "model/weights.h"

namespace qwenrt {

class CheckpointDir;
class DeviceForward;

// The column of the largest of n logits: the first of equal ones, NaN counting as −∞ (what greedy
// decoding picks, here and on the GPU).
int32_t argmax_row(const float* logits, int64_t n);

// A greedy step handed to the model without waiting for its picks (engine/StepQueue keeps these).
struct PendingStep {
  int64_t rows = 0;            // the picks it gives
  int entry = -1;              // the device executor's step entry; -1 on the CPU
  std::vector<int32_t> picks;  // on the CPU, computed at once
};

class Qwen35Model {
 public:
  Qwen35Model(ModelConfig config, ModelWeights weights, std::shared_ptr<const CheckpointDir> checkpoint = nullptr);
  Qwen35Model(Qwen35Model&&) noexcept;
  ~Qwen35Model();

  // Loads and validates a Hugging Face checkpoint directory.
  static Qwen35Model load(const std::filesystem::path& dir);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Moves the forward pass to `device` (weights uploaded and bound now); cpu keeps it here.
  void use_device(const DeviceSpec& device);
  const DeviceSpec& device() const { return device_; }
  std::string device_description() const;
  // Free memory on the device the model runs on; nullopt on the CPU.
  std::optional<std::size_t> device_free_bytes() const;

  // A cache for this model where it runs (host tensors on the CPU, device tensors on a GPU), with
  // a pool of `max_blocks` KV blocks of kCacheBlockSize tokens (0: made on demand).
  static constexpr int64_t kCacheBlockSize = 64;
  // The DeltaNet chunk of a window step on the CPU: a window span starting at a multiple of it
  // computes the same bits whether the prompt before it was split there or not.
  static constexpr int64_t kWindowChunk = 64;
  ModelCache new_cache(int max_sequences, int64_t max_blocks = 0) const;

  // Runs one step: logits [rows, V] (and, with step.hidden, the final hidden rows) for every row
  // (step.all_logits) or for the last row of each sequence, in step order. Appends the rows to each
  // sequence's cache. `out`'s storage is reused from call to call.
  void forward(const Step& step, ModelCache& cache, ThreadPool& pool, StepOutput& out) const;
  std::vector<float> forward(const Step& step, ModelCache& cache, ThreadPool& pool) const;
  void forward(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const;

  // Greedy steps: only each wanted row's argmax comes back (on a GPU the tokens are picked there, not
  // [rows, V] logits sent home). enqueue_argmax validates and books the step and returns at once
  // (on a GPU while the step runs; the CPU computes it there and then); wait_argmax gives its picks.
  // A decode step's sequence may take the pick of a row of the step enqueued just before
  // (StepSequence::from_previous; `previous` is that step). At most kMaxStepsInFlight are enqueued
  // and not yet waited for: engine/StepQueue keeps that order.
  static constexpr int kMaxStepsInFlight = 2;
  PendingStep enqueue_argmax(const Step& step, ModelCache& cache, ThreadPool& pool, const PendingStep* previous) const;
  void wait_argmax(PendingStep& pending, std::vector<int32_t>& tokens) const;

  // The MTP block (multi-token prediction), when the checkpoint has one. Its attention layer keeps
  // its own KV in a cache of its own (new_mtp_cache); row j of a sequence there is position j.
  // mtp_forward runs one step of it: each row's token (the main sequence's token t+1) with the
  // main model's hidden row for t (StepSequence::hidden_in, as forward returns it), at the MTP
  // cache's next position; logits and hidden rows (after mtp.norm) as forward gives them, on the
  // device the model runs on.
  bool has_mtp() const { return weights_.mtp.present; }

  // Deterministic mode (--deterministic): a row's results depend on nothing but its own sequence,
  // whatever else a step holds. The CPU's kernels already reduce every row alone; a GPU then runs
  // decode rows (any number) through the kernels a lone decode row uses, and each sequence's window
  // rows through products of their own. Callers cut prompts at fixed positions.
  // (A run mode of the executor, not the model's state: settable on a const model.)
  void set_deterministic(bool on) const;
  bool deterministic() const { return deterministic_; }
  ModelCache new_mtp_cache(int max_sequences) const;
  void mtp_forward(const Step& step, ModelCache& mtp_cache, ThreadPool& pool, StepOutput& out) const;

 private:
  RowLayout layout(const Step& step, const ModelCache& cache, bool mtp = false) const;
  void cpu_forward(const Step& step, const RowLayout& layout, ModelCache& cache, ThreadPool& pool, StepOutput& out) const;

  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const CheckpointDir> checkpoint_;  // keeps the mapped files alive
  std::unique_ptr<Qwen35Graph> graph_;               // reads config_ and weights_
  DeviceSpec device_;
  std::shared_ptr<DeviceForward> device_forward_;  // null on the CPU
  mutable bool deterministic_ = false;
};

}  // namespace qwenrt
