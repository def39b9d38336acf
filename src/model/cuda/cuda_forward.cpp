#include "model/cuda/cuda_forward.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_prepare.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/runtime/pinned_buffer.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "backend/cuda/rows/argmax_rows.h"
#include "backend/cuda/rows/copy_in_kernel.h"
#include "backend/cuda/rows/embed_rows.h"
#include "backend/cuda/rows/rms_norm_rows.h"
#include "backend/cuda/rows/swiglu_rows.h"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "core/error.h"

namespace qwenrt {

using bf16 = __nv_bfloat16;
using cuda::DeviceBuffer;

namespace {

// Bumped whenever device memory a captured graph may point into moves: graphs older than this
// are stale.
uint64_t g_memory_epoch = 1;

// A device buffer that grows to the largest size asked of it (contents not kept).
struct Growable {
  DeviceBuffer buf;
  template <typename T>
  T* get(std::size_t count) {
    const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 16);
    if (buf.bytes() < bytes) {
      // A step still queued (submit_argmax) may use the old buffer.
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
      buf = DeviceBuffer(bytes);
      ++g_memory_epoch;
    }
    return buf.as<T>();
  }
};

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Rows up to which products stream the weights (skinny_gemm) rather than go through cuBLAS; decode
// steps of up to this many rows also replay captured graphs.
constexpr int64_t kDecodeRows = 8;

std::vector<cuda::GemmSegment> segments_of(std::initializer_list<MatmulTarget> targets) {
  std::vector<cuda::GemmSegment> segs;
  for (const auto& t : targets) segs.push_back({t.w.data, t.w.rows, t.y, t.ldy, t.accumulate});
  return segs;
}

// Whether b's rows follow a's in the weight arena, so that both are one [a.rows + b.rows, cols] matrix.
bool follows(const CudaMatrix& a, const CudaMatrix& b) { return b.data == a.data + a.rows * a.cols && b.cols == a.cols; }

}  // namespace

// Activations of one step, sized for its rows.
struct CudaForward::Scratch {
  // The step's row metadata: packed on the host in mapped pinned memory (StepIo), copied into
  // `meta` by the step's first kernel, read through `rows`.
  Growable meta;
  const std::byte* meta_src = nullptr;  // the step's packed metadata (mapped pinned memory) ...
  std::byte* meta_dst = nullptr;        // ... and where its first kernel copies it (`meta`)
  std::size_t meta_bytes = 0;
  int32_t* picks_mirror = nullptr;      // mapped pinned memory the argmax writes too
  struct Rows {
    const int32_t *tokens, *from, *pos32, *row_slot, *row_seq, *span_first, *logit_rows, *block_tables;
    const int64_t* pos64;
    int32_t* picks;  // the step's argmax per wanted row, where the next step's embedding may look
  } rows{};
  cuda::PinnedBuffer logits_host;  // what a logits step sends back
  Growable gemm_ws, gdn_ws, h, xn, qkv, gdn_out, qg, k, v, q_bf, attn_out, attn_ws, gu, act, xf, logits, argmax_ws;
  DeviceBuffer picks;
  // The skinny GEMM's K-split tile counters: zeroed once here, left zero by every launch.
  DeviceBuffer gemm_counters;

  Scratch() : gemm_counters(cuda::kSkinnyGemmCounters * sizeof(uint32_t)) {
    QWENRT_CUDA_CHECK(cudaMemset(gemm_counters.get(), 0, gemm_counters.bytes()));
  }
  cuda::SkinnyGemmWorkspace gemm_workspace(std::size_t partial_bytes) {
    return {gemm_ws.get<std::byte>(partial_bytes), partial_bytes, gemm_counters.as<uint32_t>()};
  }
  // Room for `rows` picks. Unlike the Growable buffers it keeps its contents when it grows: the
  // step queued next may read the last step's picks (StepSequence::from_previous).
  int32_t* picks_for(int64_t rows, cudaStream_t stream) {
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(rows) * sizeof(int32_t), 256);
    if (picks.bytes() < bytes) {
      DeviceBuffer bigger(bytes);
      if (picks.bytes() > 0) QWENRT_CUDA_CHECK(cudaMemcpyAsync(bigger.get(), picks.get(), picks.bytes(), cudaMemcpyDeviceToDevice, stream));
      QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream));
      picks = std::move(bigger);
      ++g_memory_epoch;
    }
    return picks.as<int32_t>();
  }
};

// The tensors of a ModelCache on this GPU: per slot all DeltaNet layers' conv rings and
// recurrent states (one contiguous range, zeroed when a sequence starts), per attention layer a
// K and a V pool of blocks that grows with the cache's block ids.
struct CudaForward::CacheState final : DeviceCacheState {
  uint64_t serial = 0;  // tells caches apart in the graph keys (addresses can be reused)
  int64_t gdn_layer_floats = 0, conv_floats = 0, slot_floats = 0;
  DeviceBuffer gdn;
  std::vector<DeviceBuffer> k_pool, v_pool;
  int64_t pool_blocks = 0, block_floats = 0;  // block_floats: bf16 elements of one block of one layer

  void reserve_blocks(int64_t needed, cudaStream_t s) {
    if (needed <= pool_blocks) return;
    const int64_t grown = std::max<int64_t>(needed, pool_blocks * 2);
    for (auto* pools : {&k_pool, &v_pool})
      for (auto& p : *pools) {
        DeviceBuffer bigger(static_cast<std::size_t>(grown * block_floats) * sizeof(bf16));
        if (pool_blocks > 0)
          QWENRT_CUDA_CHECK(cudaMemcpyAsync(bigger.get(), p.get(), static_cast<std::size_t>(pool_blocks * block_floats) * sizeof(bf16),
                                            cudaMemcpyDeviceToDevice, s));
        QWENRT_CUDA_CHECK(cudaStreamSynchronize(s));
        p = std::move(bigger);
      }
    pool_blocks = grown;
    ++g_memory_epoch;
  }
};

CudaForward::CudaForward(int device_index, const ModelConfig& config, const ModelWeights& weights)
    : device_(device_index), config_(config), profiler_(cuda::runtime_options().profile) {
  const cuda::DeviceInfo info = cuda::require_supported_device(device_index);
  scratch_ = std::make_unique<Scratch>();  // on the device just selected
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
  weights_ = upload_weights(weights);
  int attn = 0, gdn = 0;
  for (auto kind : config_.layer_types) kind_index_.push_back(kind == LayerKind::FullAttention ? attn++ : gdn++);
  QWENRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (StepIo& io : io_) {
    QWENRT_CUDA_CHECK(cudaEventCreateWithFlags(&io.done, cudaEventDisableTiming));
  }
  use_graphs_ = cuda::runtime_options().graphs && !profiler_.enabled();
  if (const std::string& trace = cuda::runtime_options().launch_trace; !trace.empty())
    launch_trace_ = std::make_unique<cuda::LaunchTrace>(trace, 2u << 20);
}

std::string CudaForward::unsupported(const ModelConfig& c) {
  std::ostringstream why;
  if (c.moe) why << "mixture-of-experts models do not run on the CUDA backend yet";
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
  if (stream_) cudaStreamSynchronize(stream_);  // steps submitted and never collected
  launch_trace_.reset();  // written while the kernels' state is still there
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  for (StepIo& io : io_)
    if (io.done) cudaEventDestroy(io.done);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaForward::describe() const {
  return "cuda:" + std::to_string(device_) + " (" + device_name_ + ", " + std::to_string(weights_.arena.bytes() >> 20) + " MiB of weights)";
}

namespace {
// Profiler name suffixes: which product kernel ran a part.
constexpr const char* kSkinny = " (skinny)";
constexpr const char* kSkinnyNormed = " (skinny, normed)";
constexpr const char* kCublas = " (cuBLAS)";
}  // namespace

CudaForward::CacheState& CudaForward::cache_state(ModelCache& cache) {
  if (auto* s = dynamic_cast<CacheState*>(cache.device_state())) return *s;
  if (cache.device_state()) fail("internal: the cache belongs to another device executor");
  auto s = std::make_unique<CacheState>();
  static uint64_t serials = 0;
  s->serial = ++serials;
  const ModelConfig& c = config_;
  const int64_t n_gdn = c.count(LayerKind::LinearAttention), n_attn = c.count(LayerKind::FullAttention);
  s->conv_floats = c.linear_conv_kernel * c.conv_dim();
  // Recurrent states start on a 16-byte boundary (the kernel moves them in float4s).
  s->conv_floats = (s->conv_floats + 3) / 4 * 4;
  s->gdn_layer_floats = s->conv_floats + c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
  s->slot_floats = n_gdn * s->gdn_layer_floats;
  s->gdn = DeviceBuffer(static_cast<std::size_t>(std::max<int64_t>(1, s->slot_floats * cache.max_sequences())) * sizeof(float));
  s->block_floats = cache.block_size() * c.num_kv_heads * c.head_dim;
  s->k_pool.resize(static_cast<std::size_t>(n_attn));
  s->v_pool.resize(static_cast<std::size_t>(n_attn));
  CacheState& ref = *s;
  cache.set_device_state(std::move(s));
  return ref;
}

void CudaForward::matmul(const char* part, const bf16* x, int64_t n, int64_t k, int64_t ldx, std::initializer_list<MatmulTarget> targets) {
  if (n <= kDecodeRows) {
    // Decode rows: one weight-streaming launch for all targets.
    const cuda::StreamProfiler::Scope scope(profiler_, part, stream_, kSkinny);
    const std::vector<cuda::GemmSegment> segs = segments_of(targets);
    cuda::skinny_gemm(x, n, k, ldx, segs, stream_, scratch_->gemm_workspace(cuda::skinny_gemm_workspace_bytes(n, k, segs)));
    return;
  }
  if (!cublas_) cublas_ = std::make_unique<cuda::CublasGemm>();
  const cuda::StreamProfiler::Scope scope(profiler_, part, stream_, kCublas);
  // Targets whose weights follow each other in the arena and whose outputs sit side by side in one
  // row run as one product: one pass over x instead of several, and no small-N products (b and a).
  const MatmulTarget* run = nullptr;  // the first target of the product being gathered
  CudaMatrix last{};                  // its last weight
  int64_t rows = 0;
  auto flush = [&] {
    if (run) cublas_->gemm(x, n, k, ldx, run->w.data, rows, run->y, run->ldy, run->accumulate, stream_);
  };
  for (const auto& t : targets) {
    if (run && follows(last, t.w) && t.y == run->y + rows && t.ldy == run->ldy && t.accumulate == run->accumulate) {
      rows += t.w.rows;
      last = t.w;
      continue;
    }
    flush();
    run = &t;
    last = t.w;
    rows = t.w.rows;
  }
  flush();
}

bool CudaForward::fused_norm(int64_t T) const {
  // Every block of the fused launch reads the rows it normalises: worth it for one or two rows, a
  // loss beyond (measured on the H200: 27B decode +2% at batch 1, even at 2, -31% at 4, -40% at 8).
  constexpr int64_t kMaxFusedRows = 2;
  return T <= kMaxFusedRows && config_.hidden_size <= cuda::kSkinnyGemmMaxNormedK;
}

const bf16* CudaForward::normed_rows(const float* norm_w, int64_t T) {
  Scratch& s = *scratch_;
  const int64_t H = config_.hidden_size;
  bf16* xn = s.xn.get<bf16>(static_cast<std::size_t>(T * H));
  const cuda::StreamProfiler::Scope scope(profiler_, "rms norm", stream_);
  cuda::rms_norm_rows(s.h.get<float>(static_cast<std::size_t>(T * H)), H, norm_w, xn, H, T, H, static_cast<float>(config_.rms_norm_eps),
                      stream_);
  return xn;
}

cuda::SkinnyNormedRows CudaForward::residual_normed_by(const float* norm_w, int64_t T) {
  const int64_t H = config_.hidden_size;
  return {scratch_->h.get<float>(static_cast<std::size_t>(T * H)), H, norm_w, static_cast<float>(config_.rms_norm_eps)};
}

void CudaForward::normed_matmul(const char* part, const float* norm_w, int64_t T, std::initializer_list<MatmulTarget> targets) {
  const int64_t H = config_.hidden_size;
  if (!fused_norm(T)) return matmul(part, normed_rows(norm_w, T), T, H, H, targets);
  // Decode rows: the weight-streaming launch normalises the residual rows itself (no norm launch).
  const cuda::StreamProfiler::Scope scope(profiler_, part, stream_, kSkinnyNormed);
  const std::vector<cuda::GemmSegment> segs = segments_of(targets);
  cuda::skinny_gemm(residual_normed_by(norm_w, T), T, H, segs, stream_, scratch_->gemm_workspace(cuda::skinny_gemm_workspace_bytes(T, H, segs)));
}

void CudaForward::gated_activation(const CudaLayerWeights& L, int64_t T, bf16* act) {
  const int64_t H = config_.hidden_size, I = config_.intermediate_size;
  Scratch& s = *scratch_;
  if (fused_norm(T)) {
    // Decode rows: post-attention norm, gate, up and silu(gate)·up in one weight-streaming launch.
    const cuda::StreamProfiler::Scope scope(profiler_, "gate/up, swiglu", stream_, kSkinnyNormed);
    cuda::skinny_gemm_swiglu(residual_normed_by(L.post_norm, T), T, H, L.gate.data, L.up.data, I, act, I, stream_,
                             s.gemm_workspace(cuda::skinny_gemm_swiglu_workspace_bytes(T, H, I)));
    return;
  }
  const bf16* xn = normed_rows(L.post_norm, T);
  if (T <= kDecodeRows) {
    const cuda::StreamProfiler::Scope scope(profiler_, "gate/up, swiglu", stream_, kSkinny);
    cuda::skinny_gemm_swiglu(xn, T, H, H, L.gate.data, L.up.data, I, act, I, stream_,
                             s.gemm_workspace(cuda::skinny_gemm_swiglu_workspace_bytes(T, H, I)));
    return;
  }
  // Prompt rows: gate and up rounded to bf16 by cuBLAS (as a bf16 model computes them), which halves
  // the bytes the largest product writes and the activation reads.
  bf16* gu = s.gu.get<bf16>(static_cast<std::size_t>(T * 2 * I));
  {
    const cuda::StreamProfiler::Scope scope(profiler_, "gate/up", stream_, kCublas);
    if (!cublas_) cublas_ = std::make_unique<cuda::CublasGemm>();
    if (follows(L.gate, L.up)) {
      cublas_->gemm(xn, T, H, H, L.gate.data, 2 * I, gu, 2 * I, stream_);  // gate and up follow each other: one product
    } else {
      cublas_->gemm(xn, T, H, H, L.gate.data, I, gu, 2 * I, stream_);
      cublas_->gemm(xn, T, H, H, L.up.data, I, gu + I, 2 * I, stream_);
    }
  }
  const cuda::StreamProfiler::Scope scope(profiler_, "swiglu", stream_);
  cuda::swiglu_rows(gu, 2 * I, act, I, T, I, stream_);
}

void CudaForward::deltanet(const CudaLayerWeights& w, int gdn_layer, const RowLayout& lay, CacheState& cs) {
  const ModelConfig& c = config_;
  Scratch& s = *scratch_;
  const int64_t T = lay.total_rows, H = c.hidden_size, nv = c.linear_num_value_heads, vd = c.value_dim(), cd = c.conv_dim();
  const int64_t ld = deltanet_in_proj_stride(c);
  float* qkv = s.qkv.get<float>(static_cast<std::size_t>(T * ld));
  float* z = qkv + cd;
  float* ba = z + vd;
  bf16* o = s.gdn_out.get<bf16>(static_cast<std::size_t>(T * vd));
  normed_matmul("deltanet in_proj", w.input_norm, T, {{w.in_qkv, qkv, ld}, {w.in_z, z, ld}, {w.in_b, ba, ld}, {w.in_a, ba + nv, ld}});

  cuda::DeltaNetDecodeArgs a;
  a.ld_qkv = ld;
  a.ld_z = ld;
  a.ld_ba = ld;
  a.conv_w = w.conv;
  a.neg_exp_a = w.neg_exp_a;
  a.dt_bias = w.dt_bias;
  a.norm_w = w.gdn_norm;
  a.eps = static_cast<float>(c.rms_norm_eps);
  a.conv_state = cs.gdn.as<float>() + gdn_layer * cs.gdn_layer_floats;
  a.rec_state = a.conv_state + cs.conv_floats;
  a.conv_slot_stride = a.rec_slot_stride = cs.slot_floats;
  a.ld_out = vd;
  a.nk = static_cast<int>(c.linear_num_key_heads);
  a.nv = static_cast<int>(nv);
  a.dk = static_cast<int>(c.linear_key_head_dim);
  a.dv = static_cast<int>(c.linear_value_head_dim);
  a.K = static_cast<int>(c.linear_conv_kernel);
  a.qkv = qkv;
  a.z = z;
  a.b = ba;
  a.a = ba + nv;
  a.out = o;
  if (lay.phase == Phase::Decode) {
    const cuda::StreamProfiler::Scope scope(profiler_, "deltanet step", stream_);
    a.slots = s.rows.row_slot;
    a.positions = s.rows.pos64;
    a.B = static_cast<int>(T);
    cuda::deltanet_decode(a, stream_);
  } else {
    // Windows: the chunked form over all spans at once (laid out once per step, in forward).
    const cuda::StreamProfiler::Scope scope(profiler_, "deltanet chunked", stream_);
    cuda::deltanet_prefill(a, *window_, stream_);
  }
  matmul("deltanet out_proj", o, T, vd, vd, {{w.out_proj, s.h.get<float>(static_cast<std::size_t>(T * H)), H, true}});
}

void CudaForward::attention(const CudaLayerWeights& w, int attn_layer, const RowLayout& lay, CacheState& cs) {
  const ModelConfig& c = config_;
  Scratch& s = *scratch_;
  const int64_t T = lay.total_rows, H = c.hidden_size, Nq = c.num_heads, Nkv = c.num_kv_heads, Dh = c.head_dim;
  float* qg = s.qg.get<float>(static_cast<std::size_t>(T * 2 * Nq * Dh));
  float* k = s.k.get<float>(static_cast<std::size_t>(T * Nkv * Dh));
  float* v = s.v.get<float>(static_cast<std::size_t>(T * Nkv * Dh));
  bf16* q = s.q_bf.get<bf16>(static_cast<std::size_t>(T * Nq * Dh));
  bf16* out = s.attn_out.get<bf16>(static_cast<std::size_t>(T * Nq * Dh));
  normed_matmul("attention q/gate/k/v", w.input_norm, T, {{w.q_proj, qg, 2 * Nq * Dh}, {w.k_proj, k, Nkv * Dh}, {w.v_proj, v, Nkv * Dh}});

  cuda::PagedKv kv;
  kv.k = cs.k_pool[static_cast<std::size_t>(attn_layer)].as<bf16>();
  kv.v = cs.v_pool[static_cast<std::size_t>(attn_layer)].as<bf16>();
  kv.num_blocks = cs.pool_blocks;
  kv.block_size = static_cast<int>(block_size_);
  kv.num_kv_heads = static_cast<int>(Nkv);
  kv.head_dim = static_cast<int>(Dh);
  kv.block_tables = s.rows.block_tables;
  kv.max_blocks_per_seq = max_blocks_per_seq_;
  const cuda::AttentionRows rows{s.rows.pos32, s.rows.row_seq, T};
  const cuda::QkNormRope norm{w.q_norm, w.k_norm, static_cast<float>(c.rms_norm_eps), static_cast<int>(c.rotary_dim), c.rope_theta};
  profiler_.begin(lay.phase == Phase::Decode ? "attention decode" : "attention prefill", stream_);
  cuda::attention_prepare(rows, qg, k, v, static_cast<int>(Nq), norm, kv, q, stream_);
  if (lay.phase == Phase::Decode) {
    const std::size_t ws_bytes = cuda::attention_decode_workspace_bytes(T, static_cast<int>(Nq), max_len_);
    void* ws = s.attn_ws.get<std::byte>(ws_bytes);
    cuda::attention_decode(q, qg, rows.positions, T, static_cast<int>(Nq), max_len_, kv, ws, ws_bytes, out, stream_);
  } else {
    const cuda::PrefillWindows windows{s.rows.span_first, rows.positions,
                                       static_cast<int>(lay.spans.size()), T};
    cuda::attention_prefill(q, qg, windows, static_cast<int>(Nq), kv, out, stream_);
  }
  profiler_.end(stream_);
  matmul("attention o_proj", out, T, Nq * Dh, Nq * Dh, {{w.o_proj, s.h.get<float>(static_cast<std::size_t>(T * H)), H, true}});
}

namespace {

// Host arrays packed back to back (16-byte aligned each) for one copy to the device.
class MetadataPacker {
 public:
  template <typename T>
  std::size_t add(const std::vector<T>& v) {
    const std::size_t at = bytes_;
    parts_.push_back({v.data(), v.size() * sizeof(T), at});
    bytes_ += (std::max<std::size_t>(v.size() * sizeof(T), 1) + 15) / 16 * 16;
    return at;
  }
  std::size_t bytes() const { return bytes_; }
  void pack(std::byte* dst) const {
    for (const Part& p : parts_)
      if (p.bytes) std::memcpy(dst + p.at, p.src, p.bytes);
  }

 private:
  struct Part {
    const void* src;
    std::size_t bytes, at;
  };
  std::vector<Part> parts_;
  std::size_t bytes_ = 0;
};

}  // namespace

void CudaForward::forward(const Step& step, const RowLayout& lay, ModelCache& cache, std::vector<float>& logits) {
  if (!in_flight_.empty()) fail("internal: a logits step while argmax steps are in flight");
  int64_t R = 0;
  const float* dev = enqueue_step(step, lay, cache, next_io(), false, R);
  const std::size_t n = static_cast<std::size_t>(R * config_.vocab_size);
  float* host = scratch_->logits_host.get<float>(n);
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  profiler_.collect();
  logits.resize(n);
  std::memcpy(logits.data(), host, n * sizeof(float));
}

CudaForward::StepIo& CudaForward::next_io() {
  for (int i = 0; i < static_cast<int>(io_.size()); ++i) {
    StepIo& io = io_[static_cast<std::size_t>((io_turn_ + i) % static_cast<int>(io_.size()))];
    if (std::find(in_flight_.begin(), in_flight_.end(), &io) != in_flight_.end()) continue;
    io_turn_ = (io_turn_ + i + 1) % static_cast<int>(io_.size());
    return io;
  }
  fail("internal: ", io_.size(), " steps already in flight; collect one first");
}

void CudaForward::submit_argmax(const Step& step, const RowLayout& lay, ModelCache& cache) {
  StepIo& io = next_io();
  int64_t R = 0;
  enqueue_step(step, lay, cache, io, true, R);  // its picks land in io.picks_host
  io.rows = R;
  in_flight_.push_back(&io);
}

void CudaForward::collect_argmax(std::vector<int32_t>& tokens) {
  if (in_flight_.empty()) fail("internal: no submitted step to collect");
  StepIo& io = *in_flight_.front();
  in_flight_.pop_front();
  QWENRT_CUDA_CHECK(cudaEventSynchronize(io.done));
  const int32_t* host = io.picks_host.get<int32_t>(static_cast<std::size_t>(io.rows));
  tokens.assign(host, host + io.rows);
  if (in_flight_.empty()) profiler_.collect();  // its events are all complete only then
}

const float* CudaForward::enqueue_step(const Step& step, const RowLayout& lay, ModelCache& cache, StepIo& io, bool argmax, int64_t& R_out) {
  QWENRT_CUDA_CHECK(cudaSetDevice(device_));
  // The last step through this entry must be done with its pinned buffers before they are written
  // again (a step that threw after enqueuing work drained the stream; see below).
  QWENRT_CUDA_CHECK(cudaEventSynchronize(io.done));
  Scratch& s = *scratch_;
  CacheState& cs = cache_state(cache);
  const int64_t T = lay.total_rows;
  block_size_ = cache.block_size();

  // Step metadata: tokens, per-row position / slot / sequence, block tables (one row per span).
  std::vector<int32_t> tokens, from, pos32, row_slot, row_seq, span_first;
  std::vector<int64_t> pos64;
  max_blocks_per_seq_ = 1;
  max_len_ = 1;
  for (const auto& sp : lay.spans) {
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, static_cast<int>(cache.block_table(sp.slot).size()));
    max_len_ = std::max(max_len_, sp.start_position + sp.rows);
  }
  // Decode steps of up to kDecodeRows rows replay a captured graph. Everything a graph bakes in must then
  // repeat from step to step: the length bound and table stride go up in powers of two.
  const bool graphable = use_graphs_ && lay.phase == Phase::Decode && !step.all_logits && T <= kDecodeRows;
  if (graphable) {
    max_len_ = std::max<int64_t>(64, next_pow2(max_len_));
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, static_cast<int>((max_len_ + block_size_ - 1) / block_size_));
  }
  std::vector<int32_t> tables(lay.spans.size() * static_cast<std::size_t>(max_blocks_per_seq_), 0);
  for (std::size_t i = 0; i < lay.spans.size(); ++i) {
    const auto& sp = lay.spans[i];
    const auto& tab = cache.block_table(sp.slot);
    span_first.push_back(static_cast<int32_t>(sp.first_row));
    std::copy(tab.begin(), tab.end(), tables.begin() + static_cast<long>(i * static_cast<std::size_t>(max_blocks_per_seq_)));
    for (int64_t r = 0; r < sp.rows; ++r) {
      tokens.push_back(step.sequences[i].tokens[static_cast<std::size_t>(r)]);
      from.push_back(step.sequences[i].from_previous);
      pos32.push_back(static_cast<int32_t>(sp.start_position + r));
      pos64.push_back(sp.start_position + r);
      row_slot.push_back(sp.slot);
      row_seq.push_back(static_cast<int32_t>(i));
    }
    // A sequence starting afresh starts from zero state, whatever the slot held before.
    if (sp.start_position == 0 && cs.slot_floats > 0)
      QWENRT_CUDA_CHECK(cudaMemsetAsync(cs.gdn.as<float>() + sp.slot * cs.slot_floats, 0,
                                        static_cast<std::size_t>(cs.slot_floats) * sizeof(float), stream_));
  }
  span_first.push_back(static_cast<int32_t>(T));
  if (max_len_ > (int64_t{1} << 31) - 1) fail("sequence too long for the CUDA attention kernels");
  cs.reserve_blocks(cache.block_count(), stream_);
  window_.reset();
  if (lay.phase != Phase::Decode && config_.count(LayerKind::LinearAttention) > 0) {
    std::vector<cuda::DeltaNetSpan> spans;
    for (const auto& sp : lay.spans)
      spans.push_back({static_cast<int32_t>(sp.first_row), static_cast<int32_t>(sp.rows), static_cast<int32_t>(sp.start_position),
                       static_cast<int32_t>(sp.slot)});
    const int nk = static_cast<int>(config_.linear_num_key_heads), nv = static_cast<int>(config_.linear_num_value_heads);
    const std::size_t ws = cuda::deltanet_prefill_workspace_bytes(spans, nk, nv);
    window_ = std::make_unique<cuda::DeltaNetWindow>(cuda::plan_deltanet_window(spans, nk, nv, s.gdn_ws.get<std::byte>(ws), ws, stream_));
  }
  std::vector<int32_t> rows;  // the rows whose logits are wanted
  if (step.all_logits) {
    for (int64_t r = 0; r < T; ++r) rows.push_back(static_cast<int32_t>(r));
  } else {
    for (const auto& sp : lay.spans) rows.push_back(static_cast<int32_t>(sp.first_row + sp.rows - 1));
  }
  const int64_t R = static_cast<int64_t>(rows.size());
  R_out = R;

  // All row metadata in one region of mapped pinned memory, copied in by the step's first kernel.
  // The offsets follow from the row count, the span count and the table stride, which a graph's key
  // fixes, so a graph's baked addresses stay right as long as no region moves (growth bumps the
  // memory epoch). Picks go straight to the entry's mapped host memory likewise.
  MetadataPacker packer;
  const std::size_t at_tokens = packer.add(tokens), at_from = packer.add(from), at_pos32 = packer.add(pos32), at_pos64 = packer.add(pos64),
                    at_slot = packer.add(row_slot), at_seq = packer.add(row_seq), at_first = packer.add(span_first),
                    at_tables = packer.add(tables), at_logit_rows = packer.add(rows);
  auto pinned = [](cuda::PinnedBuffer& buf, std::size_t bytes) {
    const void* before = buf.get<std::byte>(0);
    std::byte* p = buf.get<std::byte>(bytes);
    if (p != before) ++g_memory_epoch;
    return p;
  };
  // The entries grow together: a growth moves what graphs bake (a new epoch), once for both.
  for (StepIo& e : io_) {
    pinned(e.meta_host, packer.bytes());
    pinned(e.picks_host, static_cast<std::size_t>(R) * sizeof(int32_t));
  }
  packer.pack(io.meta_host.get<std::byte>(packer.bytes()));
  s.meta_src = io.meta_host.device_view<std::byte>();
  s.meta_bytes = packer.bytes();
  s.picks_mirror = argmax ? io.picks_host.device_view<int32_t>() : nullptr;
  std::byte* meta = s.meta_dst = s.meta.get<std::byte>(packer.bytes());
  int32_t* picks = s.picks_for(R, stream_);
  auto at = [&](std::size_t off) { return reinterpret_cast<const int32_t*>(meta + off); };
  s.rows = {at(at_tokens), at(at_from), at(at_pos32), at(at_slot), at(at_seq), at(at_first), at(at_logit_rows), at(at_tables),
            reinterpret_cast<const int64_t*>(meta + at_pos64), picks};

  float* logits = nullptr;
  try {
    logits = run_step(lay, cs, R, graphable, static_cast<int>(&io - io_.data()), argmax);
  } catch (...) {
    cudaStreamSynchronize(stream_);  // nothing it enqueued may still read this entry's buffers
    throw;
  }
  QWENRT_CUDA_CHECK(cudaEventRecord(io.done, stream_));
  return logits;
}

float* CudaForward::run_step(const RowLayout& lay, CacheState& cs, int64_t R, bool graphable, int io_index, bool argmax) {
  const int64_t T = lay.total_rows;
  float* logits = nullptr;
  if (!graphable) {
    logits = run_layers(lay, cs, R, argmax);
  } else {
    // First sight of a shape (or memory moved since): run it eagerly, so every buffer it needs
    // exists. Later sights: capture (a graph per StepIo entry: it bakes the entry's pinned
    // buffers), then replay.
    const auto shape = std::make_tuple(T, max_len_, max_blocks_per_seq_, cs.serial, argmax);
    Graph& g = graphs_[std::tuple_cat(shape, std::make_tuple(io_index))];
    uint64_t& seen = shapes_seen_[shape];
    if (g.exec && g.epoch == g_memory_epoch) {
      QWENRT_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
      logits = g.logits;
    } else if (seen == g_memory_epoch) {
      if (g.exec) cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
      cudaGraph_t graph;
      QWENRT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        g.logits = run_layers(lay, cs, R, argmax);
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        throw;
      }
      QWENRT_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      const cudaError_t err = cudaGraphInstantiate(&g.exec, graph, 0);
      cudaGraphDestroy(graph);
      QWENRT_CUDA_CHECK(err);
      g.epoch = g_memory_epoch;
      QWENRT_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
      logits = g.logits;
    } else {
      logits = run_layers(lay, cs, R, argmax);
      seen = g_memory_epoch;
    }
  }
  return logits;
}

float* CudaForward::run_layers(const RowLayout& lay, CacheState& cs, int64_t R, bool argmax) {
  const ModelConfig& c = config_;
  Scratch& s = *scratch_;
  const int64_t T = lay.total_rows, H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* h = s.h.get<float>(static_cast<std::size_t>(T * H));
  cuda::copy_in_kernel(s.meta_src, s.meta_dst, s.meta_bytes, stream_);
  cuda::embed_rows(s.rows.tokens, s.rows.from, s.rows.picks, T, weights_.embed.data, H, h, stream_);
  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const CudaLayerWeights& L = weights_.layers[i];
    if (L.kind == LayerKind::FullAttention) attention(L, kind_index_[i], lay, cs);
    else deltanet(L, kind_index_[i], lay, cs);
    bf16* act = s.act.get<bf16>(static_cast<std::size_t>(T * I));
    gated_activation(L, T, act);
    matmul("down", act, T, I, I, {{L.down, h, H, true}});
  }

  // Final norm and head on the rows whose logits are wanted.
  bf16* xf = s.xf.get<bf16>(static_cast<std::size_t>(R * H));
  cuda::rms_norm_rows(h, H, weights_.final_norm, xf, H, R, H, eps, stream_, s.rows.logit_rows);
  float* logits = s.logits.get<float>(static_cast<std::size_t>(R * V));
  matmul("lm_head", xf, R, H, H, {{weights_.lm_head, logits, V}});
  if (argmax) {
    const std::size_t ws_bytes = cuda::argmax_workspace_bytes(R, V);
    cuda::argmax_rows(logits, V, R, V, s.rows.picks, stream_, s.argmax_ws.get<std::byte>(ws_bytes), ws_bytes, s.picks_mirror);
  }
  return logits;
}

}  // namespace qwenrt
