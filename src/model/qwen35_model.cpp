#include "model/qwen35_model.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/error.h"
#include "formats/checkpoint_dir.h"
#include "model/cpu/cpu_ops.h"
#include "model/device_forward.h"

namespace qwenrt {

Qwen35Model::Qwen35Model(ModelConfig config, ModelWeights weights, std::shared_ptr<const CheckpointDir> checkpoint)
    : config_(std::move(config)), weights_(std::move(weights)), checkpoint_(std::move(checkpoint)) {
  graph_ = std::make_unique<Qwen35Graph>(config_, weights_);
}

// The graph refers to this object's config and weights: a moved model gets a graph of its own.
Qwen35Model::Qwen35Model(Qwen35Model&& o) noexcept
    : config_(std::move(o.config_)),
      weights_(std::move(o.weights_)),
      checkpoint_(std::move(o.checkpoint_)),
      graph_(std::make_unique<Qwen35Graph>(config_, weights_)),
      device_(o.device_),
      device_forward_(std::move(o.device_forward_)),
      deterministic_(o.deterministic_) {}

Qwen35Model::~Qwen35Model() = default;

Qwen35Model Qwen35Model::load(const std::filesystem::path& dir) {
  auto ckpt = std::make_shared<const CheckpointDir>(dir);
  ModelConfig config = parse_model_config(ckpt->config(), (dir / "config.json").string());
  ModelWeights weights = bind_weights(config, *ckpt);
  return Qwen35Model(std::move(config), std::move(weights), std::move(ckpt));
}

void Qwen35Model::use_device(const DeviceSpec& device) {
  device_forward_ = make_device_forward(device, config_, weights_);
  device_ = device;
  if (device_forward_) device_forward_->set_deterministic(deterministic_);
}

void Qwen35Model::set_deterministic(bool on) const {
  deterministic_ = on;
  if (device_forward_) device_forward_->set_deterministic(on);
}

std::string Qwen35Model::device_description() const { return device_forward_ ? device_forward_->describe() : std::string("cpu"); }

std::optional<std::size_t> Qwen35Model::device_free_bytes() const {
  if (!device_forward_) return std::nullopt;
  return device_forward_->free_memory_bytes();
}

ModelCache Qwen35Model::new_cache(int max_sequences, int64_t max_blocks) const {
  return ModelCache(config_.cache_shape(), max_sequences, kCacheBlockSize, /*host_storage=*/device_forward_ == nullptr, max_blocks);
}

ModelCache Qwen35Model::new_mtp_cache(int max_sequences) const {
  if (!has_mtp()) fail("this checkpoint has no MTP block (no mtp.* tensors)");
  CacheShape shape;
  shape.attention_layers = 1;
  shape.kv_row = config_.num_kv_heads * config_.head_dim;
  return ModelCache(shape, max_sequences, kCacheBlockSize, /*host_storage=*/device_forward_ == nullptr);
}

void Qwen35Model::mtp_forward(const Step& step, ModelCache& mtp_cache, ThreadPool& pool, StepOutput& out) const {
  if (!has_mtp()) fail("this checkpoint has no MTP block (no mtp.* tensors): speculative decoding with mtp needs one");
  const RowLayout lay = layout(step, mtp_cache, /*mtp=*/true);
  for (const auto& sp : lay.spans) mtp_cache.extend(sp.slot, sp.start_position + sp.rows);
  if (device_forward_) return device_forward_->mtp_forward(step, lay, mtp_cache, *graph_, out);
  const BlockContext ctx{config_, lay, mtp_cache, pool};
  CpuOps ops(ctx, step, weights_);
  const GraphOutputs g = graph_->run_mtp(ops);
  const auto n = [](const Act& a) { return static_cast<std::size_t>(a.rows * a.cols); };
  out.logits.assign(g.logits.as<float>(), g.logits.as<float>() + n(g.logits));
  if (step.hidden) out.hidden.assign(g.hidden.as<float>(), g.hidden.as<float>() + n(g.hidden));
  else out.hidden.clear();
}

RowLayout Qwen35Model::layout(const Step& step, const ModelCache& cache, bool mtp) const {
  RowLayout lay;
  lay.phase = step.phase;
  lay.hidden_all = step.hidden_all;
  if (step.hidden_all && mtp) fail("MTP steps return the hidden rows of their logit rows (hidden_all is for the model's steps)");
  std::set<int> seen;
  const int64_t H = config_.hidden_size;
  for (const auto& s : step.sequences) {
    if (s.slot < 0 || s.slot >= cache.max_sequences()) fail("step names sequence slot ", s.slot, " which does not exist");
    if (!seen.insert(s.slot).second) fail("step names sequence slot ", s.slot, " twice");
    if (s.tokens.empty()) fail("step gives no tokens for sequence slot ", s.slot);
    if (step.phase == Phase::Decode && s.tokens.size() != 1)
      fail("decode phase takes exactly one token per sequence; slot ", s.slot, " has ", s.tokens.size());
    if (s.from_previous >= 0 && step.phase != Phase::Decode) fail("only decode steps take tokens from the previous step (slot ", s.slot, ")");
    if (s.from_previous < -1) fail("from_previous ", s.from_previous, " for slot ", s.slot, " names no row");
    if (s.embeddings.size() != s.embedding_rows.size() * static_cast<std::size_t>(H))
      fail("slot ", s.slot, " gives ", s.embeddings.size(), " embedding values for ", s.embedding_rows.size(), " rows of ", H);
    for (std::size_t i = 0; i < s.embedding_rows.size(); ++i) {
      const int32_t r = s.embedding_rows[i];
      if (r < 0 || r >= static_cast<int32_t>(s.tokens.size()) || (i > 0 && r <= s.embedding_rows[i - 1]))
        fail("slot ", s.slot, ": embedding rows must be ascending rows of the sequence's ", s.tokens.size(), " new rows; row ", r, " is not");
    }
    if (mtp) {
      if (s.hidden_in.size() != s.tokens.size() * static_cast<std::size_t>(H))
        fail("MTP step: slot ", s.slot, " gives ", s.hidden_in.size(), " hidden values for ", s.tokens.size(), " rows of ", H);
      if (!s.embedding_rows.empty() || s.from_previous >= 0) fail("MTP step: slot ", s.slot, " gives embedding rows or takes a previous pick");
    } else if (!s.hidden_in.empty()) {
      fail("slot ", s.slot, " gives hidden rows, which only MTP steps read");
    }
    if (!s.embedding_rows.empty()) {
      if (s.from_previous >= 0) fail("slot ", s.slot, " takes its token from the previous step and gives an embedding row");
      lay.given_embeddings = true;
    }
    if (s.from_previous < 0)
      for (int32_t t : s.tokens)
        if (t < 0 || t >= config_.vocab_size) fail("token id ", t, " is outside the vocabulary [0, ", config_.vocab_size, ")");
    const int64_t start = cache.length(s.slot), n = static_cast<int64_t>(s.tokens.size());
    const int64_t limit = config_.max_position_embeddings;
    if (limit > 0 && start + n > limit)
      fail("sequence slot ", s.slot, " would reach ", start + n, " tokens, past the model's context of ", limit,
           " (max_position_embeddings in its config.json)");
    lay.spans.push_back({s.slot, lay.total_rows, n, start});
    for (int64_t i = 0; i < n; ++i) lay.positions.push_back(start + i);
    lay.total_rows += n;
  }
  if (lay.total_rows == 0) fail("step has no sequences");
  if (step.all_logits) {
    for (int64_t r = 0; r < lay.total_rows; ++r) lay.logit_rows.push_back(r);
  } else {
    for (const auto& sp : lay.spans) lay.logit_rows.push_back(sp.first_row + sp.rows - 1);
  }
  return lay;
}

int32_t argmax_row(const float* logits, int64_t n) {
  // The first of equal maxima, NaN counting as −∞ (as cuda::argmax_rows). Two passes the compiler
  // vectorises (a row of a 248k vocabulary is read in ~40 µs, not ~250): the largest value, with
  // independent lanes (NaN never compares greater), then the first column holding it.
  constexpr int kLanes = 16;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float lane[kLanes];
  std::fill(lane, lane + kLanes, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
  float best = kNegInf;
  for (float v : lane) best = v > best ? v : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  if (best == kNegInf) return 0;  // every value −∞ or NaN: all equal, the first
  for (int64_t c = 0; c < n; ++c)
    if (logits[c] == best) return static_cast<int32_t>(c);
  return 0;
}

std::vector<float> Qwen35Model::forward(const Step& step, ModelCache& cache, ThreadPool& pool) const {
  std::vector<float> logits;
  forward(step, cache, pool, logits);
  return logits;
}

void Qwen35Model::forward(const Step& step, ModelCache& cache, ThreadPool& pool, std::vector<float>& logits) const {
  StepOutput out;
  out.logits = std::move(logits);
  forward(step, cache, pool, out);
  logits = std::move(out.logits);
}

void Qwen35Model::forward(const Step& step, ModelCache& cache, ThreadPool& pool, StepOutput& out) const {
  for (const auto& s : step.sequences)
    if (s.from_previous >= 0) fail("forward: only queued greedy steps take tokens from the previous step (slot ", s.slot, ")");
  const RowLayout lay = layout(step, cache);
  for (const auto& sp : lay.spans) cache.extend(sp.slot, sp.start_position + sp.rows);
  if (device_forward_) return device_forward_->forward(step, lay, cache, *graph_, out);
  cpu_forward(step, lay, cache, pool, out);
}

PendingStep Qwen35Model::enqueue_argmax(const Step& step, ModelCache& cache, ThreadPool& pool, const PendingStep* previous) const {
  if (step.hidden || step.hidden_all) fail("greedy steps return picks only; run forward for the hidden rows");
  for (const auto& s : step.sequences)
    if (s.from_previous >= 0 && (!previous || s.from_previous >= previous->rows))
      fail("slot ", s.slot, " takes row ", s.from_previous, " of the previous step's picks, which has ", previous ? previous->rows : 0);
  const RowLayout lay = layout(step, cache);
  for (const auto& sp : lay.spans) cache.extend(sp.slot, sp.start_position + sp.rows);
  PendingStep pending;
  pending.rows = static_cast<int64_t>(lay.logit_rows.size());
  if (device_forward_) {
    pending.entry = device_forward_->enqueue_argmax(step, lay, cache, *graph_);
    return pending;
  }
  // The CPU runs the step now, its sequences' tokens taken from the picks of the step before.
  Step resolved = step;
  for (auto& s : resolved.sequences)
    if (s.from_previous >= 0) s.tokens = {previous->picks[static_cast<std::size_t>(s.from_previous)]};
  StepOutput out;
  cpu_forward(resolved, lay, cache, pool, out);
  const int64_t V = config_.vocab_size;
  pending.picks.resize(static_cast<std::size_t>(pending.rows));
  for (std::size_t r = 0; r < pending.picks.size(); ++r) pending.picks[r] = argmax_row(&out.logits[r * static_cast<std::size_t>(V)], V);
  return pending;
}

void Qwen35Model::wait_argmax(PendingStep& pending, std::vector<int32_t>& tokens) const {
  if (pending.entry >= 0) {
    if (!device_forward_) fail("internal: a device step waited for on the CPU");
    device_forward_->wait_argmax(pending.entry, tokens);
    pending.entry = -1;
    pending.picks = tokens;  // a step after it may take its picks (the CPU reads them, a GPU its own)
    return;
  }
  tokens = pending.picks;
}

void Qwen35Model::cpu_forward(const Step& step, const RowLayout& lay, ModelCache& cache, ThreadPool& pool, StepOutput& out) const {
  const BlockContext ctx{config_, lay, cache, pool};
  CpuOps ops(ctx, step, weights_);
  const GraphOutputs g = graph_->run(ops);
  const auto n = [](const Act& a) { return static_cast<std::size_t>(a.rows * a.cols); };
  out.logits.assign(g.logits.as<float>(), g.logits.as<float>() + n(g.logits));
  if (step.hidden || step.hidden_all) out.hidden.assign(g.hidden.as<float>(), g.hidden.as<float>() + n(g.hidden));
  else out.hidden.clear();
}

}  // namespace qwenrt
