#pragma once
// The op set on the CPU for one step: f32 activations, the kernels of backend/cpu and the mixers
// of model/cpu. Plain and exact: every (row, output) sum in a fixed order whatever the batch.
#include <array>
#include <vector>

#include "model/cpu/block_context.h"
#include "model/ops.h"
#include "model/step.h"

namespace qwenrt {

class CpuOps final : public Ops {
 public:
  CpuOps(const BlockContext& ctx, const Step& step, const ModelWeights& weights) : ctx_(ctx), step_(step), weights_(weights) {}

  void begin_layer(int layer) override { layer_ = layer; }
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
  Act given_hidden() override;
  Act concat(Part part, const Act& a, const Act& b) override;

 private:
  // Output `index` of `part`: [rows, cols] f32, its storage kept until the part runs again.
  Act buffer(Part part, int index, int64_t rows, int64_t cols);

  // Error naming the layer (and the first bad row's slot and position) when `rows` rows of `x`
  // are not all finite: a NaN or Inf weight, or an overflow, stops the step instead of yielding
  // garbage tokens.
  void require_finite(const Act& x, const char* what) const;

  const BlockContext& ctx_;
  const Step& step_;
  const ModelWeights& weights_;
  std::array<std::vector<std::vector<float>>, static_cast<std::size_t>(Part::kCount)> buffers_;
  int layer_ = -1;  // the layer running (-1: embedding or head)
};

}  // namespace qwenrt
