// qwenrt bench: prefill and decode speed on a checkpoint or on random weights with the shapes of a
// released size, reported against the memory bandwidth measured in the same run.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "backend/cpu/matmul.h"
#include "backend/cpu/memory_bandwidth.h"
#include "backend/cpu/mlx_affine_int8.h"
#include "cli/bench_speculative.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "cli/synthetic_model.h"
#include "core/error.h"
#include "engine/step_queue.h"
#ifdef QWENRT_HAVE_CUDA
#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/gemm/cublas_gemm.h"
#endif
#include "model/qwen35_model.h"

namespace qwenrt::cli {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Products of a P-token prefill in the matrix units: every projection once per token (a MoE layer:
// the experts a token uses), attention scores and values over the causal pairs; the head only for
// the last row. The DeltaNet recurrence (about 1% at 8k tokens) is left out.
double prefill_flops(const ModelConfig& c, int64_t P) {
  double per_token = 2.0 * static_cast<double>(matmul_params(c));
  if (c.moe) {
    const int64_t H = c.hidden_size;
    per_token -= 2.0 * 3.0 * H * static_cast<double>(c.num_experts - c.experts_per_token) * c.moe_intermediate_size * c.layer_types.size();
  }
  const double pairs = static_cast<double>(P) * static_cast<double>(P + 1) / 2.0;
  const double attention = 4.0 * pairs * static_cast<double>(c.head_dim * c.num_heads) * static_cast<double>(c.count(LayerKind::FullAttention));
  return per_token * static_cast<double>(P) + attention + 2.0 * static_cast<double>(c.vocab_size * c.hidden_size);
}

// Bytes of weight matrices one decode step of `batch` rows must stream: everything, except that a
// MoE layer reads only the experts its rows pick (at most batch·k distinct ones; assume distinct).
std::size_t decode_weight_bytes(const ModelConfig& c, const ModelWeights& w, int64_t batch) {
  std::size_t total = w.matrix_bytes();
  if (!c.moe) return total;
  for (const auto& l : w.layers) {
    const int64_t used = std::min<int64_t>(c.num_experts, batch * c.experts_per_token);
    const auto& e = l.moe.experts.front();
    const std::size_t per_expert = e.gate.bytes() + e.up.bytes() + e.down.bytes();
    total -= per_expert * static_cast<std::size_t>(c.num_experts - used);
  }
  return total;
}

}  // namespace

int run_bench(const Args& args) {
  Options opt("bench",
              {"model", "synthetic", "quant", "prompt-tokens", "gen-tokens", "batch", "prefill-chunk", "file", "segments", "repeats", "speculative",
               "draft-tokens", "accept-rate"},
              {"json", "fixed-draft", kDeterministicFlag}, {{"-f", "file"}});
  opt.parse(args);
  apply_process_options(opt);
  const DeviceSpec device = device_option(opt);
  if (opt.has("speculative")) return run_bench_speculative(opt, device);
  for (const char* only : {"file", "segments", "repeats", "draft-tokens", "accept-rate"})
    if (opt.has(only)) fail("bench: --", only, " goes with --speculative mtp");
  if (opt.flag("fixed-draft")) fail("bench: --fixed-draft goes with --speculative mtp");
  if (opt.has("model") == opt.has("synthetic")) fail("bench: give exactly one of --model and --synthetic");
  const int64_t P = opt.integer_or("prompt-tokens", 128, 1, 1 << 20);
  const int64_t G = opt.integer_or("gen-tokens", 32, 1, 1 << 20);
  const int64_t B = opt.integer_or("batch", 1, 1, 4096);
  const int64_t chunk = opt.integer_or("prefill-chunk", P, 1, 1 << 20);
  ThreadPool& pool = ThreadPool::global();

  std::string source;
  std::optional<Qwen35Model> model;
  const double t_load = now_s();
  // --quant: the synthetic matrices' format (model/weights.h SyntheticFormat), bytes per weight.
  SyntheticFormat format = SyntheticFormat::BF16;
  if (opt.has("quant")) {
    if (!opt.has("synthetic")) fail("bench: --quant applies to --synthetic weights (a checkpoint's own format is used with --model)");
    const std::string q = opt.str("quant");
    if (q == "q4") format = SyntheticFormat::MlxQ4;
    else if (q == "q8") format = SyntheticFormat::MlxQ8;
    else if (q == "fp8") format = SyntheticFormat::Fp8;
    else if (q != "bf16") fail("bench: --quant '", q, "' is not one of q4, q8, fp8, bf16");
  }
  if (opt.has("synthetic")) {
    source = "synthetic:" + opt.str("synthetic") + (opt.has("quant") ? ":" + opt.str("quant") : "");
    model.emplace(synthetic_model(opt.str("synthetic"), device, "bench", format));
  } else {
    source = opt.str("model");
    model.emplace(Qwen35Model::load(source));
  }
  model->use_device(device);
  model->set_deterministic(opt.flag(kDeterministicFlag));  // every row computed as it would be alone
  const ModelConfig& c = model->config();
  const double load_s = now_s() - t_load;

  // The ceiling of the device the step runs on: the read bandwidth of the CPU, or the copy
  // bandwidth (read + write) of the GPU, each measured now.
  const bool gpu = device.kind == DeviceSpec::Kind::Cuda;
  cpu::Bandwidth bw{};
  if (gpu) {
#ifdef QWENRT_HAVE_CUDA
    bw.read_GBps = bw.copy_GBps = cuda::copy_bandwidth_GBps();
#endif
  } else {
    bw = cpu::measure_bandwidth(pool);
  }

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(std::min<int64_t>(c.vocab_size, 1 << 30) - 1));
  // One slot more than the batch: an untimed prefill of the same shape runs there first, so the
  // timed one measures the engine warmed up (libraries loaded, buffers sized), as a server runs.
  ModelCache cache = model->new_cache(static_cast<int>(B + 1));
  // Every step picks its tokens as greedy generation does (on the GPU when it runs there), so the
  // times include choosing the next tokens, not only the logits.
  std::vector<int32_t> picked;
  StepQueue queue(*model, cache, pool);
  {
    const int warm = cache.acquire();
    for (int64_t p0 = 0; p0 < P; p0 += chunk) {
      Step step{Phase::Window, {{warm, {}}}, false};
      for (int64_t i = p0; i < std::min(P, p0 + chunk); ++i) step.sequences[0].tokens.push_back(tok(rng));
      queue.run(step, picked);
    }
    cache.release(warm);
  }
  std::vector<int> slots;
  for (int64_t b = 0; b < B; ++b) slots.push_back(cache.acquire());

  // Prefill: sequence 0's prompt timed; the others are filled untimed so decode runs at batch B.
  double prefill_s = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p0 = 0; p0 < P; p0 += chunk) {
      Step step{Phase::Window, {{slots[static_cast<std::size_t>(b)], {}}}, false};
      for (int64_t i = p0; i < std::min(P, p0 + chunk); ++i) step.sequences[0].tokens.push_back(tok(rng));
      const double t0 = now_s();
      queue.run(step, picked);
      if (b == 0) prefill_s += now_s() - t0;
    }
  }

  // Decode G steps at batch B after untimed ones: on a GPU a step's shape runs eagerly first
  // (sizing buffers), then each of the StepQueue::kMaxInFlight host-side entries captures its CUDA graph,
  // which the timed steps replay, as a server's steps do once it has seen its batch sizes. (Captures
  // among the timed steps cost 0.8B ~4%.) The steps run as greedy generation's do: each queued
  // before the host has seen the tokens of the one before, which it takes on the device.
  auto submit_decode = [&](bool chained) {
    Step step{Phase::Decode, {}, false};
    for (std::size_t b = 0; b < slots.size(); ++b) {
      step.sequences.push_back({slots[b], {chained ? 0 : tok(rng)}});
      if (chained) step.sequences.back().from_previous = static_cast<int32_t>(b);
    }
    queue.submit(step);
  };
  auto run_queued = [&](int64_t steps, bool chained_first) {
    for (int64_t g = 0; g < steps; ++g) {
      submit_decode(chained_first || g > 0);
      if (queue.in_flight() == StepQueue::kMaxInFlight) queue.collect(picked);
    }
    queue.discard();  // waits for the steps still queued
  };
  const int64_t warm_steps = 1 + 2 * StepQueue::kMaxInFlight;
  run_queued(warm_steps, false);
  const double t0 = now_s();
  run_queued(G, true);
  const double decode_s = now_s() - t0;
  const double step_s = decode_s / static_cast<double>(G);

  // Bytes one step must move: weights once, plus each sequence's DeltaNet state read and written and
  // its KV read (at the mean context length of the timed steps).
  // Positions P + warm_steps .. P + warm_steps + G - 1.
  const double mean_ctx = static_cast<double>(P + warm_steps) + static_cast<double>(G - 1) / 2.0;
  const double bytes_step =
      static_cast<double>(decode_weight_bytes(c, model->weights(), B)) +
      static_cast<double>(B) * (2.0 * static_cast<double>(cache.state_bytes_per_sequence()) +
                                mean_ctx * static_cast<double>(cache.kv_bytes_per_token()) / (gpu ? 2.0 : 1.0));  // bf16 KV on the GPU
  const double floor_s = bytes_step / (bw.read_GBps * 1e9);
  // The prefill's ceiling on the GPU: the rate of its own bf16 GEMM path at a 27B MLP shape, now.
  double matmul_TFLOPs = 0;
#ifdef QWENRT_HAVE_CUDA
  if (gpu) matmul_TFLOPs = cuda::cublas_gemm_TFLOPs(8192, 5120, 17408);
#endif
  const double prefill_TFLOPs = prefill_flops(c, P) / prefill_s / 1e12;

  nlohmann::json j;
  j["model"] = source;
  j["threads"] = pool.size();
  j["isa"] = gpu ? "cuda" : cpu::matmul_isa();
  j["int8_activations"] = cpu::int8_activations();
  j["device"] = model->device_description();
#ifdef QWENRT_HAVE_CUDA
  if (gpu) j["gpu_memory_used_GB"] = static_cast<double>(cuda::device_memory_used()) / 1e9;
#endif
  j["batch"] = B;
  j["deterministic"] = opt.flag(kDeterministicFlag);
  j["prompt_tokens"] = P;
  j["gen_tokens"] = G;
  j["load_s"] = load_s;
  j["prefill_tok_s"] = static_cast<double>(P) / prefill_s;
  j["decode_tok_s"] = static_cast<double>(B) / step_s;
  j["decode_step_ms"] = step_s * 1e3;
  j["bytes_per_decode_step"] = bytes_step;
  j["measured_bandwidth_GBps"] = bw.read_GBps;
  j["measured_copy_bandwidth_GBps"] = bw.copy_GBps;
  j["decode_floor_ms"] = floor_s * 1e3;
  j["decode_fraction_of_floor"] = floor_s / step_s;
  j["prefill_TFLOPs"] = prefill_TFLOPs;
  if (matmul_TFLOPs > 0) {
    j["measured_matmul_TFLOPs"] = matmul_TFLOPs;
    j["prefill_fraction_of_matmul"] = prefill_TFLOPs / matmul_TFLOPs;
  }
  if (opt.flag("json")) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s, %d threads (%s%s), batch %lld%s\n", source.c_str(), pool.size(), cpu::matmul_isa(),
                cpu::int8_activations() ? ", int8 activations" : "", static_cast<long long>(B),
                opt.flag(kDeterministicFlag) ? ", deterministic" : "");
    std::printf("prefill  %lld tokens: %.1f tok/s, %.1f TFLOP/s", static_cast<long long>(P), static_cast<double>(P) / prefill_s, prefill_TFLOPs);
    if (matmul_TFLOPs > 0)
      std::printf(" = %.0f%% of the bf16 GEMM rate measured now (%.0f TFLOP/s)", 100.0 * prefill_TFLOPs / matmul_TFLOPs, matmul_TFLOPs);
    std::printf("\n");
    std::printf("decode   %.2f ms/step, %.2f tok/s; floor %.2f ms (%.1f MB at %.1f GB/s read) -> %.0f%% of floor\n", step_s * 1e3,
                static_cast<double>(B) / step_s, floor_s * 1e3, bytes_step / 1e6, bw.read_GBps, 100.0 * floor_s / step_s);
  }
  return 0;
}

}  // namespace qwenrt::cli
