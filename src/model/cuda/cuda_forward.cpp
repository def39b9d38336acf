#include "model/cuda/cuda_forward.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <sstream>

#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/rows/argmax_rows.h"
#include "backend/cuda/rows/copy_in_kernel.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "core/error.h"
#include "core/half.h"
#include "model/cuda/cuda_weights.h"
#include "model/cuda/health_site.h"
#include "model/non_finite.h"

namespace qwenrt {

CudaForward::CudaForward(int device_index, const ModelConfig& config, ModelWeights& weights)
    : device_(device_index), config_(config), profiler_(cuda::runtime_options().profile) {
  const cuda::DeviceInfo info = cuda::require_supported_device(device_index);
  scratch_ = std::make_unique<ScratchArena>();  // on the device just selected
  device_name_ = info.name;
  if (const std::string why = unsupported(config); !why.empty()) fail("--device cuda: ", why, "; use --device cpu");
  // Every kernel's shared memory per block, against what the GPU allows (99 KiB on consumer Ampere,
  // Ada and Blackwell cards, 163 KiB on the A100, 227 KiB on Hopper): a clear error here rather than
  // a failed launch in the middle of a prompt.
  const std::size_t shared_needed =
      std::max({cuda::deltanet_prefill_shared_bytes(static_cast<int>(config.linear_num_value_heads)), cuda::attention_prefill_shared_bytes(),
                cuda::attention_decode_shared_bytes(), cuda::kSkinnyGemmMaxSharedBytes});
  if (info.shared_per_block_optin < shared_needed)
    fail("--device cuda: ", info.name, " (compute capability ", info.major, ".", info.minor, ") allows ", info.shared_per_block_optin / 1024,
         " KiB of shared memory per block; qwenrt's CUDA kernels need ", (shared_needed + 1023) / 1024,
         " KiB for this model (A100-class Ampere and Hopper GPUs have enough); use --device cpu");
  weight_arena_ = upload_weights(weights);
  QWENRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (StepIo& io : io_) QWENRT_CUDA_CHECK(cudaEventCreateWithFlags(&io.done, cudaEventDisableTiming));
  use_graphs_ = cuda::runtime_options().graphs && !profiler_.enabled();
  if (const std::string& trace = cuda::runtime_options().launch_trace; !trace.empty())
    launch_trace_ = std::make_unique<cuda::LaunchTrace>(trace, 2u << 20);
}

std::string CudaForward::unsupported(const ModelConfig& c) {
  std::ostringstream why;
  if (c.moe && (c.num_experts > cuda::kMoeMaxExperts || c.experts_per_token > cuda::kMoeMaxExpertsPerToken))
    why << c.num_experts << " experts with top-" << c.experts_per_token << " are not built (at most " << cuda::kMoeMaxExperts << " experts, top-"
        << cuda::kMoeMaxExpertsPerToken << ")";
  else if (c.moe && (c.moe_intermediate_size % 8 != 0 || c.shared_expert_intermediate_size > c.moe_intermediate_size))
    why << "expert FFN size " << c.moe_intermediate_size << " (shared " << c.shared_expert_intermediate_size
        << ") is not built (a multiple of 8, the shared expert's no larger, as in every released Qwen 3.5 MoE)";
  else if (c.head_dim != cuda::kAttentionHeadDim)
    why << "attention head_dim " << c.head_dim << " is not built (" << cuda::kAttentionHeadDim << " is, as in every released Qwen 3.5)";
  else if (c.linear_key_head_dim != cuda::kDeltaNetDecodeHeadDim || c.linear_value_head_dim != cuda::kDeltaNetDecodeHeadDim ||
           c.linear_conv_kernel != cuda::kDeltaNetDecodeConvKernel)
    why << "DeltaNet head dims " << c.linear_key_head_dim << "/" << c.linear_value_head_dim << " with conv kernel " << c.linear_conv_kernel
        << " are not built (" << cuda::kDeltaNetDecodeHeadDim << "/" << cuda::kDeltaNetDecodeHeadDim << " with " << cuda::kDeltaNetDecodeConvKernel
        << " are, as in every released Qwen 3.5)";
  else if (c.num_heads % c.num_kv_heads != 0 || c.num_heads / c.num_kv_heads > cuda::kDecodeMaxGroup)
    why << c.num_heads << " query heads per " << c.num_kv_heads << " kv heads: groups of at most " << cuda::kDecodeMaxGroup << " are built";
  else if (c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0)
    why << "hidden size " << c.hidden_size << " and FFN size " << c.intermediate_size << " must be multiples of 8";
  return why.str();
}

CudaForward::~CudaForward() {
  if (profiler_.enabled()) std::fprintf(stderr, "GPU time by part (QWENRT_CUDA_PROFILE):\n%s", profiler_.report().c_str());
  if (stream_) cudaStreamSynchronize(stream_);  // steps enqueued and never waited for
  launch_trace_.reset();                        // written while the kernels' state is still there
  for (StepIo& io : io_)
    if (io.done) cudaEventDestroy(io.done);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaForward::describe() const {
  return "cuda:" + std::to_string(device_) + " (" + device_name_ + ", " + std::to_string(weight_arena_.bytes() >> 20) + " MiB of weights)";
}

std::size_t CudaForward::free_memory_bytes() const { return cuda::device_info(device_).free_bytes; }

StepIo& CudaForward::free_entry() {
  for (int i = 0; i < static_cast<int>(io_.size()); ++i) {
    StepIo& io = io_[static_cast<std::size_t>((io_turn_ + i) % static_cast<int>(io_.size()))];
    if (io.busy) continue;
    io_turn_ = (io_turn_ + i + 1) % static_cast<int>(io_.size());
    return io;
  }
  fail("internal: ", io_.size(), " steps already in flight; wait for one first");
}

void CudaForward::forward(const Step& step, const RowLayout& lay, ModelCache& cache, const Qwen35Graph& graph, StepOutput& out) {
  logits_step(step, lay, cache, graph, out, false);
}

void CudaForward::mtp_forward(const Step& step, const RowLayout& lay, ModelCache& mtp_cache, const Qwen35Graph& graph, StepOutput& out) {
  logits_step(step, lay, mtp_cache, graph, out, true);
}

void CudaForward::logits_step(const Step& step, const RowLayout& lay, ModelCache& cache, const Qwen35Graph& graph, StepOutput& out, bool mtp) {
  for (const StepIo& io : io_)
    if (io.busy) fail("forward: greedy steps are still in flight; collect them first");
  const GraphOutputs g = enqueue_step(step, lay, cache, graph, free_entry(), false, mtp);
  const std::size_t nl = static_cast<std::size_t>(g.logits.rows * g.logits.cols);
  const std::size_t nh = step.hidden || step.hidden_all ? static_cast<std::size_t>(g.hidden.rows * g.hidden.cols) : 0;
  // Logits (f32), the hidden rows (bf16 on the GPU) and the step's health word in one pinned
  // buffer, one wait.
  const std::size_t at_health = (nl * sizeof(float) + nh * sizeof(uint16_t) + 7) / 8 * 8;
  std::byte* host = logits_host_.get<std::byte>(at_health + sizeof(unsigned long long));
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(host, g.logits.data, nl * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  if (nh) QWENRT_CUDA_CHECK(cudaMemcpyAsync(host + nl * sizeof(float), g.hidden.data, nh * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_));
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(host + at_health, step_health_, sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream_));
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  profiler_.collect();
  unsigned long long health;
  std::memcpy(&health, host + at_health, sizeof health);
  check_step_health(health, config_, lay);
  out.logits.resize(nl);
  // The norms saw the residual stream; a non-finite head (its weights) shows only in the logits,
  // checked while they are copied (an all-ones exponent is NaN or ±Inf; integer ORs vectorise).
  const auto* logits = reinterpret_cast<const float*>(host);
  const auto* bits = reinterpret_cast<const uint32_t*>(host);
  uint32_t non_finite = 0;
  for (std::size_t i = 0; i < nl; ++i) {
    out.logits[i] = logits[i];
    non_finite |= static_cast<uint32_t>((~bits[i] & 0x7f800000u) == 0);
  }
  if (non_finite)
    for (std::size_t i = 0; i < nl; ++i)
      if (!std::isfinite(logits[i])) fail_non_finite(config_, lay, -1, "head", lay.logit_rows[i / static_cast<std::size_t>(g.logits.cols)]);
  out.hidden.resize(nh);
  const auto* hb = reinterpret_cast<const uint16_t*>(host + nl * sizeof(float));
  for (std::size_t i = 0; i < nh; ++i) out.hidden[i] = bf16_to_f32(hb[i]);
}

int CudaForward::enqueue_argmax(const Step& step, const RowLayout& lay, ModelCache& cache, const Qwen35Graph& graph) {
  StepIo& io = free_entry();
  enqueue_step(step, lay, cache, graph, io, true);  // its picks land in io.picks_host
  io.layout = lay;                                  // what a failing step's error names
  io.rows = static_cast<int64_t>(lay.logit_rows.size());
  io.busy = true;
  return static_cast<int>(&io - io_.data());
}

void CudaForward::wait_argmax(int entry, std::vector<int32_t>& tokens) {
  if (entry < 0 || entry >= static_cast<int>(io_.size()) || !io_[static_cast<std::size_t>(entry)].busy)
    fail("internal: no enqueued step in entry ", entry);
  StepIo& io = io_[static_cast<std::size_t>(entry)];
  QWENRT_CUDA_CHECK(cudaEventSynchronize(io.done));
  const std::byte* host = io.picks_host.get<std::byte>(health_offset(io.rows) + static_cast<std::size_t>(io.rows) * sizeof(unsigned long long));
  const auto* picks = reinterpret_cast<const int32_t*>(host);
  tokens.assign(picks, picks + io.rows);
  unsigned long long health = cuda::kStepHealthy;
  for (int64_t r = 0; r < io.rows; ++r) {
    unsigned long long h;
    std::memcpy(&h, host + health_offset(io.rows) + static_cast<std::size_t>(r) * sizeof h, sizeof h);
    health = std::min(health, h);
  }
  io.busy = false;
  bool any_busy = false;
  for (const StepIo& e : io_) any_busy |= e.busy;
  if (!any_busy) profiler_.collect();  // its events are all complete only then
  check_step_health(health, config_, io.layout);
}

int64_t CudaForward::window_decode_rows(const RowLayout& lay) const {
  // Deterministic steps keep every window row on the window kernels: a one-row span's bits would
  // otherwise depend on whether a longer span comes before it in the step.
  if (lay.phase != Phase::Window || deterministic_) return 0;
  int64_t n = 0;
  while (n < static_cast<int64_t>(lay.spans.size()) && lay.spans[static_cast<std::size_t>(n)].rows == 1) ++n;
  return n;
}

GraphOutputs CudaForward::enqueue_step(const Step& step, const RowLayout& lay, ModelCache& cache, const Qwen35Graph& graph, StepIo& io, bool argmax,
                                       bool mtp) {
  QWENRT_CUDA_CHECK(cudaSetDevice(device_));
  // The last step through this entry must be done with its pinned buffers before they are written
  // again (a step that threw after enqueuing work drained the stream; see below).
  QWENRT_CUDA_CHECK(cudaEventSynchronize(io.done));
  CudaCacheState& cs = CudaCacheState::of(cache, config_, stream_);
  // Slots armed for speculation: where each of their rows' DeltaNet states go.
  std::vector<unsigned long long> keep;
  for (const auto& sp : lay.spans) {
    const int armed = cache.kept_rows(sp.slot);
    if (armed == 0 || cs.slot_floats == 0) continue;
    if (lay.phase == Phase::Window) fail("internal: a slot kept for speculation runs a window step (verify in the committed phase)");
    if (sp.start_position != cache.kept_rows_start(sp.slot) || sp.rows > armed)
      fail("internal: slot ", sp.slot, " was armed for ", armed, " rows from position ", cache.kept_rows_start(sp.slot), ", the step gives ", sp.rows,
           " from ", sp.start_position);
    if (keep.empty()) keep.assign(static_cast<std::size_t>(lay.total_rows), 0);
    float* base = cs.kept_states(sp.slot, armed);
    for (int64_t r = 0; r < sp.rows; ++r)
      keep[static_cast<std::size_t>(sp.first_row + r)] = reinterpret_cast<unsigned long long>(base + r * cs.slot_floats);
  }
  StepShape shape;
  const StepRows rows = pack_step(step, lay, cache, use_graphs_ && !mtp, argmax, shape, keep, io_, io, *scratch_, stream_);
  step_health_ = rows.health;
  // A sequence starting afresh starts from zero state, whatever the slot held before.
  for (const auto& sp : lay.spans)
    if (sp.start_position == 0 && cs.slot_floats > 0)
      QWENRT_CUDA_CHECK(
          cudaMemsetAsync(cs.gdn.as<float>() + sp.slot * cs.slot_floats, 0, static_cast<std::size_t>(cs.slot_floats) * sizeof(float), stream_));
  // A bounded pool (the server's, sized at start-up) is allocated whole on first use.
  cs.reserve_blocks(cache.max_blocks() > 0 ? cache.max_blocks() : cache.block_count(), stream_);
  window_.reset();
  const int64_t decode_rows = window_decode_rows(lay);
  if (lay.phase == Phase::Window && cs.slot_floats > 0 && decode_rows < lay.total_rows) {
    std::vector<cuda::DeltaNetSpan> spans;
    for (const auto& sp : std::span(lay.spans).subspan(static_cast<std::size_t>(decode_rows)))
      spans.push_back({static_cast<int32_t>(sp.first_row), static_cast<int32_t>(sp.rows), static_cast<int32_t>(sp.start_position),
                       static_cast<int32_t>(sp.slot)});
    const int nk = static_cast<int>(config_.linear_num_key_heads), nv = static_cast<int>(config_.linear_num_value_heads);
    const std::size_t ws = cuda::deltanet_prefill_workspace_bytes(spans, nk, nv);
    window_ =
        std::make_unique<cuda::DeltaNetWindow>(cuda::plan_deltanet_window(spans, nk, nv, scratch_->deltanet_window.get<std::byte>(ws), ws, stream_));
  }

  const CudaStepContext ctx{config_, graph.weights(), step, lay, rows, shape, cs, window_.get(), *scratch_, cublas_, profiler_, stream_, deterministic_,
                              decode_rows};
  // The whole step, from the copy of its metadata to the picks: what a captured graph holds.
  auto enqueue = [&]() -> GraphOutputs {
    cuda::copy_in_kernel(rows.meta_src, rows.meta_dst, rows.meta_bytes, stream_);
    CudaOps ops(ctx);
    const GraphOutputs out = mtp ? graph.run_mtp(ops) : graph.run(ops);
    if (argmax) {
      const int64_t R = out.logits.rows, V = out.logits.cols;
      const std::size_t ws_bytes = cuda::argmax_workspace_bytes(R, V);
      cuda::argmax_rows(out.logits.as<float>(), out.logits.ld, R, V, rows.picks, stream_, scratch_->argmax.get<std::byte>(ws_bytes), ws_bytes,
                        rows.picks_mirror, {rows.health, head_site(config_), rows.health_mirror});
    }
    return out;
  };
  GraphOutputs out;
  try {
    if (shape.graphable) {
      const GraphCache::Shape key{lay.total_rows, shape.max_len, shape.max_blocks_per_seq, cs.serial, argmax, shape.pattern};
      out = graphs_.run(key, static_cast<int>(&io - io_.data()), stream_, enqueue);
    } else {
      out = enqueue();
    }
  } catch (...) {
    cudaStreamSynchronize(stream_);  // nothing it enqueued may still read this entry's buffers
    throw;
  }
  QWENRT_CUDA_CHECK(cudaEventRecord(io.done, stream_));
  return out;
}

}  // namespace qwenrt
