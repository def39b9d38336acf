#pragma once
// The Qwen 3.5 text decoder written once, against the op set (model/ops.h) that every backend
// implements: embedding, L hybrid layers (Gated DeltaNet or gated attention, then SwiGLU MLP or
// MoE, each behind a pre-norm with a residual), final norm, head.
#include <vector>

#include "model/config.h"
#include "model/ops.h"
#include "model/weights.h"

namespace qwenrt {

struct GraphOutputs {
  Act logits;  // [wanted rows, V]
  Act hidden;  // [wanted rows (every row with hidden_all), H]: the final norm's output (MTP's input)
};

class Qwen35Graph {
 public:
  Qwen35Graph(const ModelConfig& config, const ModelWeights& weights);

  // One step through every layer; the ops know the step's rows and cache.
  GraphOutputs run(Ops& ops) const;

  // One step of the MTP block (weights().mtp), its rows pairing each row's token embedding with
  // the main model's hidden row the step gives: fc(concat[norm(embedding), norm(hidden)]), one
  // full-attention layer (attention cache layer 0 of the ops' cache: the MTP's own), its MLP or
  // MoE, mtp.norm, the main head. `hidden` out is after mtp.norm: what a draft chain feeds back.
  GraphOutputs run_mtp(Ops& ops) const;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

 private:
  void deltanet_block(Ops& ops, const LayerWeights& L, int gdn_layer, Act& h) const;
  void attention_block(Ops& ops, const LayerWeights& L, int attn_layer, Act& h) const;
  void feed_forward_block(Ops& ops, const LayerWeights& L, Act& h) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::vector<int> kind_index_;  // per layer: its index among the layers of its kind (cache addressing)
};

}  // namespace qwenrt
