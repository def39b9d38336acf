#pragma once
// The op set on one NVIDIA GPU for one step: the kernels of backend/cuda behind the ops the graph
// calls, and the choice among them (skinny weight-streaming products for decode rows, cuBLAS for
// prompt rows; the norm inside the product for one or two rows; the DeltaNet recurrence or the
// chunked window). bf16 weights and matrix inputs, an f32 residual stream.
#include <cuda_runtime_api.h>

#include <memory>

#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/diagnostics/stream_profiler.h"
#include "backend/cuda/gemm/cublas_gemm.h"
#include "model/config.h"
#include "model/cuda/cuda_cache_state.h"
#include "model/cuda/scratch_arena.h"
#include "model/cuda/step_io.h"
#include "model/ops.h"
#include "model/step.h"

namespace qwenrt::cuda {
struct SkinnyNormedRows;
}

namespace qwenrt {

// Row stride (floats) of a DeltaNet layer's input projections on the GPU: q|k|v, z, b and a side by
// side in one row, so that prompt rows take them as one product; a multiple of 4 for the kernels'
// float4 loads.
inline int64_t deltanet_in_proj_stride(const ModelConfig& c) { return (c.conv_dim() + c.value_dim() + 2 * c.linear_num_value_heads + 3) / 4 * 4; }

// What the ops of one step share with the executor that runs it.
struct CudaStepContext {
  const ModelConfig& config;
  const ModelWeights& weights;
  const Step& step;
  const RowLayout& layout;
  const StepRows& rows;
  const StepShape& shape;
  CudaCacheState& cache;
  const cuda::DeltaNetWindow* window;  // windows: the DeltaNet layout, planned once per step
  ScratchArena& scratch;
  std::unique_ptr<cuda::CublasGemm>& cublas;  // loaded on the first product of more than 8 rows
  cuda::StreamProfiler& profiler;
  cudaStream_t stream;
  bool deterministic = false;  // Qwen35Model::set_deterministic
  // Windows: the leading rows whose spans are one row each (the decode rows a mixed step carries
  // ahead of its prompt chunks): DeltaNet and attention run them through the decode kernels, the
  // window kernels take the spans after them (window_decode_rows of layout.spans).
  int64_t window_decode_rows = 0;
};

class CudaOps final : public Ops {
 public:
  explicit CudaOps(const CudaStepContext& ctx) : c_(ctx) {}

  Act embed() override;
  Act rms_norm(Part part, const Act& x, const ParamVector& w) override;
  std::vector<Act> matmul(Part part, const Act& x, std::initializer_list<const Weight*> weights) override;
  void add(Act& h, const Act& y) override;
  Act swiglu(const Act& gate, const Act& up) override;
  Act gated_deltanet(const DeltaNetWeights& w, int gdn_layer, const Act& qkv, const Act& z, const Act& b, const Act& a) override;
  Act gated_attention(const AttentionWeights& w, int attn_layer, const Act& qg, const Act& k, const Act& v) override;
  Act moe(const MoeWeights& w, const Act& x) override;
  Act norm_logit_rows(const Act& x, const ParamVector& w) override;
  Act hidden_rows(const Act& x, const ParamVector& w, const Act& logit_rows) override;
  // The MTP block's inputs: the main model's hidden rows from the step, and [a | b].
  Act given_hidden() override;
  Act concat(Part part, const Act& a, const Act& b) override;

  // Fused: the norm inside the weight-streaming product for one or two rows, the residual added by
  // the product, gate/up and SwiGLU in one launch.
  std::vector<Act> norm_matmul(Part part, const Act& h, const ParamVector& w, std::initializer_list<const Weight*> weights) override;
  void matmul_add(Part part, const Act& x, const Weight& w, Act& h) override;
  Act norm_gate_up_swiglu(const Act& h, const ParamVector& w, const Weight& gate, const Weight& up) override;
  // The experts' weighted sum added to the residual by their last launch (no add launch); for one
  // or two rows the router product normalises the rows and stores them for the experts (no norm
  // launch).
  void moe_add(const MoeWeights& w, const Act& x, Act& h) override;
  void norm_moe_add(const ParamVector& w, const MoeWeights& moe, Act& h) override;

  void begin_layer(int layer) override {
    layer_ = layer;
    norms_in_layer_ = 0;
  }

 private:
  struct Target;
  // Outputs of a product of `part`: side by side in one row for the in_proj and gate/up parts
  // (prompt rows then take them as one cuBLAS product), one buffer each otherwise.
  std::vector<Act> outputs(Part part, int64_t rows, std::initializer_list<const Weight*> weights);
  void product(Part part, const Act& x, const std::vector<Target>& targets);
  // `normed`: x is still to be written, by the router product normalising these rows.
  void moe_into(const MoeWeights& w, const Act& x, float* y, int64_t ldy, bool accumulate, const cuda::SkinnyNormedRows* normed = nullptr);
  bool fused_norm(int64_t rows) const;
  // Committed steps compute each row as a lone decode row would, bit for bit: products and experts
  // through the decode kernels (up to 64 rows a launch, 8 quantized or MoE), whatever the row count. So do all but window rows in
  // deterministic mode (the head of a window step included).
  bool row_invariant() const { return c_.layout.phase == Phase::Committed || (c_.deterministic && c_.layout.phase == Phase::Decode); }
  // Calls f(first, rows) over [0, n): once, or, for a window step's rows in deterministic mode, per
  // sequence (a prompt's rows then go through cuBLAS in products of their own, whatever else runs).
  template <typename F>
  void for_row_ranges(int64_t n, F f) const {
    if (!(c_.deterministic && c_.layout.phase == Phase::Window && n == c_.layout.total_rows)) return f(int64_t{0}, n);
    for (const auto& sp : c_.layout.spans) f(sp.first_row, sp.rows);
  }
  // Where the next norm reports non-finite rows (the step's health word, this norm's site).
  cuda::NonFiniteProbe norm_probe();
  // The residual rows h for a weight-streaming launch to normalise itself with norm weight w (this
  // norm's probe taken).
  cuda::SkinnyNormedRows normed_rows(const Act& h, const ParamVector& w);
  const CudaStepContext& c_;
  int layer_ = -1;  // the layer running (-1: before the first)
  int norms_in_layer_ = 0;
};

}  // namespace qwenrt
