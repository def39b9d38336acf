#include "model/qwen35_model.h"

#include <limits>
#include <set>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "formats/checkpoint_dir.h"
#include "model/attention.h"
#include "model/deltanet.h"
#include "model/device_forward.h"
#include "model/feed_forward.h"

namespace qwenrt {

Qwen35Model::Qwen35Model(ModelConfig config, ModelWeights weights, std::shared_ptr<const CheckpointDir> checkpoint)
    : config_(std::move(config)), weights_(std::move(weights)), checkpoint_(std::move(checkpoint)) {
  int attn = 0, gdn = 0;
  for (auto kind : config_.layer_types) kind_index_.push_back(kind == LayerKind::FullAttention ? attn++ : gdn++);
}

Qwen35Model Qwen35Model::load(const std::filesystem::path& dir) {
  auto ckpt = std::make_shared<const CheckpointDir>(dir);
  ModelConfig config = parse_model_config(ckpt->config(), (dir / "config.json").string());
  ModelWeights weights = bind_weights(config, *ckpt);
  return Qwen35Model(std::move(config), std::move(weights), std::move(ckpt));
}

void Qwen35Model::use_device(const DeviceSpec& device) {
  device_forward_ = make_device_forward(device, config_, weights_);
  device_ = device;
}

std::string Qwen35Model::device_description() const {
  return device_forward_ ? device_forward_->describe() : std::string("cpu");
}

ModelCache Qwen35Model::new_cache(int max_sequences) const {
  return ModelCache(config_, max_sequences, 64, /*host_storage=*/device_forward_ == nullptr);
}

RowLayout Qwen35Model::layout(const Step& step, const ModelCache& cache) const {
  RowLayout lay;
  lay.phase = step.phase;
  std::set<int> seen;
  for (const auto& s : step.sequences) {
    if (s.slot < 0 || s.slot >= cache.max_sequences()) fail("step names sequence slot ", s.slot, " which does not exist");
    if (!seen.insert(s.slot).second) fail("step names sequence slot ", s.slot, " twice");
    if (s.tokens.empty()) fail("step gives no tokens for sequence slot ", s.slot);
    if (step.phase == Phase::Decode && s.tokens.size() != 1)
      fail("decode phase takes exactly one token per sequence; slot ", s.slot, " has ", s.tokens.size());
    if (s.from_previous >= 0 && step.phase != Phase::Decode) fail("only decode steps take tokens from the previous step (slot ", s.slot, ")");
    if (s.from_previous < -1) fail("from_previous ", s.from_previous, " for slot ", s.slot, " names no row");
    if (s.from_previous < 0)
      for (int32_t t : s.tokens)
        if (t < 0 || t >= config_.vocab_size) fail("token id ", t, " is outside the vocabulary [0, ", config_.vocab_size, ")");
    const int64_t start = cache.length(s.slot), n = static_cast<int64_t>(s.tokens.size());
    lay.spans.push_back({s.slot, lay.total_rows, n, start});
    for (int64_t i = 0; i < n; ++i) lay.positions.push_back(start + i);
    lay.total_rows += n;
  }
  if (lay.total_rows == 0) fail("step has no sequences");
  return lay;
}

int32_t argmax_row(const float* logits, int64_t n) {
  // The first of equal maxima, NaN counting as −∞ (as cuda::argmax_rows).
  auto key = [](float x) { return x != x ? -std::numeric_limits<float>::infinity() : x; };
  int64_t best = 0;
  float best_key = key(logits[0]);
  for (int64_t i = 1; i < n; ++i)
    if (key(logits[i]) > best_key) {
      best = i;
      best_key = key(logits[i]);
    }
  return static_cast<int32_t>(best);
}

std::vector<float> Qwen35Model::forward(const Step& step, ModelCache& cache, ThreadPool& pool) const {
  std::vector<float> logits;
  forward(step, cache, pool, logits);
  return logits;
}

void Qwen35Model::forward(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const {
  if (!in_flight_rows_.empty()) fail("forward: ", in_flight_rows_.size(), " argmax steps are still in flight; collect them first");
  for (const auto& s : step.sequences)
    if (s.from_previous >= 0) fail("forward: only submit_argmax takes tokens from the previous step (slot ", s.slot, ")");
  const RowLayout lay = layout(step, cache);
  for (const auto& sp : lay.spans) cache.extend(sp.slot, sp.start_position + sp.rows);
  if (device_forward_) return device_forward_->forward(step, lay, cache, logits);
  cpu_forward(step, lay, cache, pool, logits);
}

void Qwen35Model::forward_argmax(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<int32_t>& tokens) const {
  if (!in_flight_rows_.empty()) fail("forward_argmax: ", in_flight_rows_.size(), " argmax steps are still in flight; collect them first");
  submit_argmax(step, cache, pool);
  collect_argmax(tokens);
}

void Qwen35Model::submit_argmax(const Step& step, ModelCache& cache, ThreadPool& pool) const {
  if (static_cast<int>(in_flight_rows_.size()) >= kArgmaxInFlight)
    fail("submit_argmax: ", kArgmaxInFlight, " steps are already in flight; collect one first");
  for (const auto& s : step.sequences)
    if (s.from_previous >= previous_rows_)
      fail("slot ", s.slot, " takes row ", s.from_previous, " of the previous step's picks, which has ", previous_rows_);
  const RowLayout lay = layout(step, cache);
  const int64_t rows = step.all_logits ? lay.total_rows : static_cast<int64_t>(lay.spans.size());
  for (const auto& sp : lay.spans) cache.extend(sp.slot, sp.start_position + sp.rows);
  if (device_forward_) {
    device_forward_->submit_argmax(step, lay, cache);
  } else {
    // The CPU runs the step now, its sequences' tokens taken from the picks of the step before.
    Step resolved = step;
    for (auto& s : resolved.sequences)
      if (s.from_previous >= 0) s.tokens = {cpu_picks_.back()[static_cast<std::size_t>(s.from_previous)]};
    std::vector<float> logits;
    cpu_forward(resolved, lay, cache, pool, logits);
    const int64_t V = config_.vocab_size;
    std::vector<int32_t> picks(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < picks.size(); ++r) picks[r] = argmax_row(&logits[r * static_cast<std::size_t>(V)], V);
    cpu_picks_.push_back(std::move(picks));
    if (cpu_picks_.size() > static_cast<std::size_t>(kArgmaxInFlight)) cpu_picks_.pop_front();  // collected; kept for from_previous
  }
  in_flight_rows_.push_back(rows);
  previous_rows_ = rows;
}

void Qwen35Model::collect_argmax(std::vector<int32_t>& tokens) const {
  if (in_flight_rows_.empty()) fail("collect_argmax: no step was submitted");
  in_flight_rows_.pop_front();
  if (device_forward_) return device_forward_->collect_argmax(tokens);
  tokens = cpu_picks_[cpu_picks_.size() - 1 - in_flight_rows_.size()];
}

void Qwen35Model::discard_argmax() const {
  std::vector<int32_t> dropped;
  while (!in_flight_rows_.empty()) collect_argmax(dropped);
}

void Qwen35Model::cpu_forward(const Step& step, const RowLayout& lay, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const {
  const int64_t T = lay.total_rows, H = config_.hidden_size, V = config_.vocab_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  BlockContext ctx{config_, lay, cache, pool};

  // Embedding rows, widened to f32: the residual stream.
  std::vector<float> h(static_cast<std::size_t>(T * H)), normed(h.size()), mixed(h.size());
  {
    int64_t r = 0;
    for (const auto& s : step.sequences)
      for (int32_t tok : s.tokens) weights_.embed.row_to_f32(tok, &h[r++ * H]);
  }
  auto norm_rows = [&](const std::vector<float>& w) {
    pool.parallel_for(static_cast<std::size_t>(T), 4, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) cpu::rms_norm(&h[r * H], w.data(), &normed[r * H], H, eps);
    });
  };
  auto add_residual = [&] {
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += mixed[i];
  };

  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const LayerWeights& L = weights_.layers[i];
    norm_rows(L.input_norm);
    if (L.kind == LayerKind::FullAttention) attention_forward(ctx, L.attn, kind_index_[i], normed.data(), mixed.data());
    else deltanet_forward(ctx, L.gdn, kind_index_[i], normed.data(), mixed.data());
    add_residual();
    norm_rows(L.post_norm);
    if (config_.moe) moe_forward(config_, L.moe, normed.data(), T, mixed.data(), pool);
    else mlp_forward(L.mlp, normed.data(), T, mixed.data(), pool);
    add_residual();
  }

  // Final norm and head, only on the rows whose logits are wanted.
  std::vector<int64_t> rows;
  if (step.all_logits) {
    for (int64_t r = 0; r < T; ++r) rows.push_back(r);
  } else {
    for (const auto& sp : lay.spans) rows.push_back(sp.first_row + sp.rows - 1);
  }
  std::vector<float> final_rows(rows.size() * static_cast<std::size_t>(H));
  for (std::size_t i = 0; i < rows.size(); ++i)
    cpu::rms_norm(&h[rows[i] * H], weights_.final_norm.data(), &final_rows[i * H], H, eps);
  logits.resize(rows.size() * static_cast<std::size_t>(V));
  cpu::matmul(final_rows.data(), static_cast<int64_t>(rows.size()), weights_.lm_head, logits.data(), pool);
}

}  // namespace qwenrt
