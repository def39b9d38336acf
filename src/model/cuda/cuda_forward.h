#pragma once
// The executor of the Qwen 3.5 graph on one NVIDIA GPU: it uploads and binds the weights, packs
// each step's rows (step_io), plans the DeltaNet window, runs the graph with the GPU op set
// (cuda_ops) eagerly or from a captured CUDA graph (graph_cache), and brings the logits, hidden
// rows or picks home.
#include <array>
#include <memory>

#include "backend/cuda/diagnostics/launch_trace.h"
#include "backend/cuda/diagnostics/stream_profiler.h"
#include "backend/cuda/gemm/cublas_gemm.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "model/cuda/cuda_ops.h"
#include "model/cuda/graph_cache.h"
#include "model/cuda/scratch_arena.h"
#include "model/cuda/step_io.h"
#include "model/device_forward.h"

namespace qwenrt {

class CudaForward final : public DeviceForward {
 public:
  // Uploads `weights` to GPU `device_index` and binds them (their `bound` fields).
  CudaForward(int device_index, const ModelConfig& config, ModelWeights& weights);
  ~CudaForward() override;

  // Why this build's kernels cannot run `config` (empty when they can).
  static std::string unsupported(const ModelConfig& config);

  void forward(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph, StepOutput& out) override;
  void mtp_forward(const Step& step, const RowLayout& layout, ModelCache& mtp_cache, const Qwen35Graph& graph, StepOutput& out) override;
  int enqueue_argmax(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph) override;
  void wait_argmax(int entry, std::vector<int32_t>& tokens) override;
  std::string describe() const override;
  void set_deterministic(bool on) override { deterministic_ = on; }
  std::size_t free_memory_bytes() const override;

 private:
  StepIo& free_entry();  // a host-side entry not in flight
  // Packs the step into `io`, plans its DeltaNet window and enqueues the graph (eagerly or from a
  // captured CUDA graph), with each wanted row's argmax into io.picks_host when `argmax`.
  // `mtp`: the step runs the MTP block (eagerly) rather than the model.
  GraphOutputs enqueue_step(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph, StepIo& io, bool argmax,
                            bool mtp = false);
  // Windows: how many leading rows are one-row spans, run through the decode kernels
  // (CudaStepContext::window_decode_rows); 0 for other phases and deterministic steps.
  int64_t window_decode_rows(const RowLayout& layout) const;
  // Runs a logits step and brings its logits and hidden rows home into `out`.
  void logits_step(const Step& step, const RowLayout& layout, ModelCache& cache, const Qwen35Graph& graph, StepOutput& out, bool mtp);

  int device_;
  std::string device_name_;
  ModelConfig config_;
  cuda::DeviceBuffer weight_arena_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ScratchArena> scratch_;
  std::unique_ptr<cuda::CublasGemm> cublas_;      // loaded on the first product of more than 8 rows
  std::unique_ptr<cuda::DeltaNetWindow> window_;  // the DeltaNet layout of the current window step
  GraphCache graphs_;
  bool use_graphs_ = true;  // QWENRT_CUDA_GRAPHS=0 runs every step eagerly
  bool deterministic_ = false;
  // QWENRT_CUDA_PROFILE=1: GPU time per part of the forward pass, printed to stderr at the end
  // (steps then run eagerly).
  cuda::StreamProfiler profiler_;
  // QWENRT_CUDA_LAUNCH_TRACE=file.csv (a build with the trace): every block's wait, written at the end.
  std::unique_ptr<cuda::LaunchTrace> launch_trace_;
  std::array<StepIo, 2> io_;
  int io_turn_ = 0;
  cuda::PinnedBuffer logits_host_;                   // what a logits step sends back
  const unsigned long long* step_health_ = nullptr;  // the last enqueued step's health word (device)
};

}  // namespace qwenrt
