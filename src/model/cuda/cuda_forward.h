#pragma once
// The Qwen 3.5 forward pass on one NVIDIA GPU: the CPU model's layers with the CUDA kernels of
// backend/cuda, bf16 weights and matrix inputs, an f32 residual stream, f32 DeltaNet state and a
// paged bf16 KV cache.
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

#include "backend/cuda/gemm/cublas_gemm.h"
#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/diagnostics/launch_trace.h"
#include "backend/cuda/runtime/pinned_buffer.h"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/diagnostics/stream_profiler.h"
#include "model/cuda/cuda_weights.h"
#include "model/device_forward.h"

namespace qwenrt {

// One product of a matrix call: y[b * ldy + r] (+)= x[b] · W[r].
struct MatmulTarget {
  CudaMatrix w;
  float* y;
  int64_t ldy;
  bool accumulate = false;
};

// Row stride (floats) of a DeltaNet layer's input projections as the forward lays them out: q|k|v,
// z, b and a side by side in one row, so that prompt rows take them as one product; a multiple of 4
// for the kernels' float4 loads.
inline int64_t deltanet_in_proj_stride(const ModelConfig& c) {
  return (c.conv_dim() + c.value_dim() + 2 * c.linear_num_value_heads + 3) / 4 * 4;
}

class CudaForward final : public DeviceForward {
 public:
  CudaForward(int device_index, const ModelConfig& config, const ModelWeights& weights);

  // Why this build's kernels cannot run `config` (empty when they can).
  static std::string unsupported(const ModelConfig& config);
  ~CudaForward() override;

  void forward(const Step& step, const RowLayout& layout, ModelCache& cache, std::vector<float>& logits) override;
  void submit_argmax(const Step& step, const RowLayout& layout, ModelCache& cache) override;
  void collect_argmax(std::vector<int32_t>& tokens) override;
  std::string describe() const override;

 private:
  struct Scratch;
  struct CacheState;
  // A step's host side: two of them, so that a step can be queued while the one before runs.
  struct StepIo {
    cuda::PinnedBuffer meta_host, picks_host;  // mapped: the step's kernels read and write them
    cudaEvent_t done = nullptr;                 // the step is done with them (its picks are there)
    int64_t rows = 0;                           // picked rows
  };
  CacheState& cache_state(ModelCache& cache);
  StepIo& next_io();  // the entry the next step uses (one not in flight)
  // Packs the step's metadata into `io` and enqueues its layers (eagerly or as a graph), with the
  // argmax of each wanted row into io.picks_host when `argmax`; returns the device logits of the
  // wanted rows, `rows` of them.
  const float* enqueue_step(const Step& step, const RowLayout& layout, ModelCache& cache, StepIo& io, bool argmax, int64_t& rows);
  float* run_step(const RowLayout& layout, CacheState& cs, int64_t logit_rows, bool graphable, int io_index, bool argmax);
  float* run_layers(const RowLayout& layout, CacheState& cs, int64_t logit_rows, bool argmax);  // enqueues; returns device logits
  // `part` names the product for QWENRT_CUDA_PROFILE.
  void matmul(const char* part, const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::initializer_list<MatmulTarget> targets);
  // Products of the normalised residual: x·Wᵀ for each target with x = RMSNorm(h) · norm_w.
  // Decode rows normalise inside the weight-streaming launch; prompt rows through xn first.
  void normed_matmul(const char* part, const float* norm_w, int64_t rows, std::initializer_list<MatmulTarget> targets);
  bool fused_norm(int64_t rows) const;
  const __nv_bfloat16* normed_rows(const float* norm_w, int64_t rows);  // RMSNorm(h) · norm_w into xn
  cuda::SkinnyNormedRows residual_normed_by(const float* norm_w, int64_t rows);
  // act = silu(x·gateᵀ) ⊙ (x·upᵀ) in bf16 with x = RMSNorm(h) · post_norm, the input of down_proj.
  void gated_activation(const CudaLayerWeights& w, int64_t rows, __nv_bfloat16* act);
  void deltanet(const CudaLayerWeights& w, int gdn_layer, const RowLayout& layout, CacheState& cs);
  void attention(const CudaLayerWeights& w, int attn_layer, const RowLayout& layout, CacheState& cs);

  int device_;
  std::string device_name_;
  ModelConfig config_;
  CudaWeights weights_;
  std::vector<int> kind_index_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<cuda::CublasGemm> cublas_;  // loaded on the first call of more than 8 rows
  std::unique_ptr<cuda::DeltaNetWindow> window_;  // the DeltaNet layout of the current window step
  // Decode graphs by (rows, length bound, table stride, cache, argmax, StepIo entry): captured once
  // the shape has run eagerly, replayed after; stale once device or pinned memory has moved (epoch).
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    float* logits = nullptr;
    uint64_t epoch = 0;
  };
  using GraphShape = std::tuple<int64_t, int64_t, int, uint64_t, bool>;
  std::map<std::tuple<int64_t, int64_t, int, uint64_t, bool, int>, Graph> graphs_;
  std::map<GraphShape, uint64_t> shapes_seen_;  // the epoch in which a shape last ran eagerly
  bool use_graphs_ = true;  // QWENRT_CUDA_GRAPHS=0 runs every step eagerly
  // QWENRT_CUDA_PROFILE=1: GPU time per part of the forward pass, printed to stderr at the end
  // (steps then run eagerly).
  cuda::StreamProfiler profiler_;
  // QWENRT_CUDA_LAUNCH_TRACE=file.csv (a build with the trace): every block's wait, written at the end.
  std::unique_ptr<cuda::LaunchTrace> launch_trace_;
  std::array<StepIo, 2> io_;
  int io_turn_ = 0;
  std::deque<StepIo*> in_flight_;  // submitted argmax steps not yet collected, oldest first
  // Of the step being run:
  int64_t block_size_ = 64, max_len_ = 1;
  int max_blocks_per_seq_ = 1;
};

}  // namespace qwenrt
