#include "model/qwen35_graph.h"

namespace qwenrt {

Qwen35Graph::Qwen35Graph(const ModelConfig& config, const ModelWeights& weights) : config_(config), weights_(weights) {
  int attn = 0, gdn = 0;
  for (auto kind : config_.layer_types) kind_index_.push_back(kind == LayerKind::FullAttention ? attn++ : gdn++);
}

GraphOutputs Qwen35Graph::run(Ops& ops) const {
  Act h = ops.embed();
  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const LayerWeights& L = weights_.layers[i];
    ops.begin_layer(static_cast<int>(i));
    if (L.kind == LayerKind::FullAttention) attention_block(ops, L, kind_index_[i], h);
    else deltanet_block(ops, L, kind_index_[i], h);
    feed_forward_block(ops, L, h);
  }
  GraphOutputs out;
  const Act head_in = ops.norm_logit_rows(h, weights_.final_norm);
  out.hidden = ops.hidden_rows(h, weights_.final_norm, head_in);
  out.logits = ops.matmul(Part::LmHead, head_in, {&weights_.lm_head})[0];
  return out;
}

GraphOutputs Qwen35Graph::run_mtp(Ops& ops) const {
  const MtpWeights& m = weights_.mtp;
  const Act e = ops.rms_norm(Part::MtpEmbeddingNorm, ops.embed(), m.pre_fc_norm_embedding);
  const Act hn = ops.rms_norm(Part::MtpHiddenNorm, ops.given_hidden(), m.pre_fc_norm_hidden);
  Act h = ops.matmul(Part::MtpFc, ops.concat(Part::MtpConcat, e, hn), {&m.fc})[0];
  attention_block(ops, m.layer, 0, h);
  feed_forward_block(ops, m.layer, h);
  GraphOutputs out;
  out.hidden = ops.norm_logit_rows(h, m.norm);
  out.logits = ops.matmul(Part::LmHead, out.hidden, {&weights_.lm_head})[0];
  return out;
}

// h += out_proj(GatedDeltaNet(in_proj(RMSNorm(h))))
void Qwen35Graph::deltanet_block(Ops& ops, const LayerWeights& L, int gdn_layer, Act& h) const {
  const DeltaNetWeights& w = L.gdn;
  const std::vector<Act> p = ops.norm_matmul(Part::DeltaNetInProj, h, L.input_norm, {&w.in_qkv, &w.in_z, &w.in_b, &w.in_a});
  const Act o = ops.gated_deltanet(w, gdn_layer, p[0], p[1], p[2], p[3]);
  ops.matmul_add(Part::DeltaNetOutProj, o, w.out_proj, h);
}

// h += o_proj(GatedAttention(q/gate, k, v of RMSNorm(h)))
void Qwen35Graph::attention_block(Ops& ops, const LayerWeights& L, int attn_layer, Act& h) const {
  const AttentionWeights& w = L.attn;
  const std::vector<Act> p = ops.norm_matmul(Part::AttentionInProj, h, L.input_norm, {&w.q_proj, &w.k_proj, &w.v_proj});
  const Act o = ops.gated_attention(w, attn_layer, p[0], p[1], p[2]);
  ops.matmul_add(Part::AttentionOutProj, o, w.o_proj, h);
}

// h += down(silu(gate(x)) ⊙ up(x)), or h += MoE(x), with x = RMSNorm(h)
void Qwen35Graph::feed_forward_block(Ops& ops, const LayerWeights& L, Act& h) const {
  if (config_.moe) {
    ops.norm_moe_add(L.post_norm, L.moe, h);
    return;
  }
  const Act act = ops.norm_gate_up_swiglu(h, L.post_norm, L.mlp.gate, L.mlp.up);
  ops.matmul_add(Part::Down, act, L.mlp.down, h);
}

}  // namespace qwenrt
