#include "model/cuda/cuda_ops.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_prepare.h"
#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/quant/dequantize_rows.h"
#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/rows/add_in_place.h"
#include "backend/cuda/rows/embed_rows.h"
#include "backend/cuda/rows/rms_norm_rows.h"
#include "backend/cuda/rows/swiglu_rows.h"
#include "backend/cuda/rows/to_bf16_rows.h"
#include "core/error.h"
#include "model/cuda/health_site.h"
#include "model/cuda/quant_upload.h"

namespace qwenrt {

using bf16 = __nv_bfloat16;

namespace {

// Profiler name suffixes: which product kernel ran a part.
constexpr const char* kSkinny = " (skinny)";
constexpr const char* kSkinnyNormed = " (skinny, normed)";
constexpr const char* kCublas = " (cuBLAS)";
constexpr const char* kSkinnyQuant = " (skinny, quantized)";
constexpr const char* kDequantCublas = " (dequantized, cuBLAS)";

// A weight's bf16 copy on this GPU (model/cuda/cuda_weights bound it at load).
const bf16* device_bf16(const Weight& w) {
  if (!w.bound.data || w.bound.format != WeightFormat::BF16) fail("internal: a weight without its bf16 copy on the GPU");
  return static_cast<const bf16*>(w.bound.data);
}
const float* device_f32(const ParamVector& v) {
  if (!v.bound) fail("internal: a parameter vector without its copy on the GPU");
  return v.bound;
}

// Whether b's rows follow a's on the device, so that both are one [a.rows + b.rows, cols] matrix.
bool follows(const Weight& a, const Weight& b) {
  return !a.quantized() && !b.quantized() && device_bf16(b) == device_bf16(a) + a.rows * a.cols && b.cols == a.cols;
}

bool any_quantized(std::initializer_list<const Weight*> weights) {
  return std::any_of(weights.begin(), weights.end(), [](const Weight* w) { return w->quantized(); });
}

// Prompt rows of a quantized product dequantize at most this many weight elements at a time into a
// bf16 scratch matrix for cuBLAS (128 MiB; larger matrices run in row slices).
constexpr int64_t kDequantSliceElements = int64_t{64} << 20;
constexpr int64_t kPackedMoeDecodeRows = 64;

}  // namespace

// One product's weight and where it goes: y[b * ldy + r] (+)= x[b] · W[r].
struct CudaOps::Target {
  const Weight* w;
  float* y;
  int64_t ldy;
  bool accumulate = false;
};

cuda::NonFiniteProbe CudaOps::norm_probe() {
  // Each layer normalises the stream twice (before its mixer, before its MLP): health_site.h.
  const int sub = std::min(norms_in_layer_++, 1);
  return {c_.rows.health, layer_ < 0 ? final_norm_site(c_.config) : static_cast<uint32_t>(2 * layer_ + sub)};
}

cuda::SkinnyNormedRows CudaOps::normed_rows(const Act& h, const ParamVector& w) {
  return {h.as<float>(), h.ld, device_f32(w), static_cast<float>(c_.config.rms_norm_eps), norm_probe()};
}

bool CudaOps::fused_norm(int64_t T) const {
  // Every block of the fused launch reads the rows it normalises: worth it for one or two rows, a
  // loss beyond (measured on the H200: 27B decode +2% at batch 1, even at 2, -31% at 4, -40% at 8).
  constexpr int64_t kMaxFusedRows = 2;
  return T <= kMaxFusedRows && c_.config.hidden_size <= cuda::kSkinnyGemmMaxNormedK;
}

Act CudaOps::embed() {
  const int64_t T = c_.layout.total_rows, H = c_.config.hidden_size;
  float* h = c_.scratch.part<float>(Part::Residual, static_cast<std::size_t>(T * H));
  if (c_.weights.embed.quantized())  // rows dequantized on lookup
    cuda::embed_quant_rows(c_.rows.tokens, c_.rows.from, c_.rows.picks, T, device_quant(c_.weights.embed), h, c_.stream);
  else cuda::embed_rows(c_.rows.tokens, c_.rows.from, c_.rows.picks, T, device_bf16(c_.weights.embed), H, h, c_.stream);
  if (c_.layout.given_embeddings) {
    // Rows given by the caller (vision features, MTP inputs) replace their token's embedding. Such
    // steps run eagerly, so a copy from pageable memory in the stream is fine here.
    for (std::size_t i = 0; i < c_.step.sequences.size(); ++i) {
      const StepSequence& s = c_.step.sequences[i];
      const int64_t first = c_.layout.spans[i].first_row;
      for (std::size_t j = 0; j < s.embedding_rows.size(); ++j)
        QWENRT_CUDA_CHECK(cudaMemcpyAsync(h + (first + s.embedding_rows[j]) * H, &s.embeddings[j * static_cast<std::size_t>(H)],
                                          static_cast<std::size_t>(H) * sizeof(float), cudaMemcpyHostToDevice, c_.stream));
    }
  }
  return {h, ActType::F32, T, H, H};
}

Act CudaOps::rms_norm(Part part, const Act& x, const ParamVector& w) {
  if (x.type != ActType::F32) fail("internal: RMSNorm of bf16 rows on the GPU");
  const int64_t T = x.rows, H = x.cols;
  bf16* y = c_.scratch.part<bf16>(part, static_cast<std::size_t>(T * H));
  const cuda::StreamProfiler::Scope scope(c_.profiler, "rms norm", c_.stream);
  cuda::rms_norm_rows(x.as<float>(), x.ld, device_f32(w), y, H, T, H, static_cast<float>(c_.config.rms_norm_eps), c_.stream, nullptr, norm_probe());
  return {y, ActType::BF16, T, H, H};
}

std::vector<Act> CudaOps::outputs(Part part, int64_t T, std::initializer_list<const Weight*> weights) {
  std::vector<Act> out;
  if (part == Part::DeltaNetInProj || part == Part::GateUp) {
    // Side by side in one row (a multiple of 4 floats for the kernels' float4 loads).
    int64_t width = 0;
    for (const Weight* w : weights) width += w->rows;
    const int64_t ld = (width + 3) / 4 * 4;
    float* y = c_.scratch.part<float>(part, static_cast<std::size_t>(T * ld));
    int64_t col = 0;
    for (const Weight* w : weights) {
      out.push_back({y + col, ActType::F32, T, w->rows, ld});
      col += w->rows;
    }
    return out;
  }
  int i = 0;
  for (const Weight* w : weights)
    out.push_back({c_.scratch.part<float>(part, static_cast<std::size_t>(T * w->rows), i++), ActType::F32, T, w->rows, w->rows});
  return out;
}

void CudaOps::product(Part part, const Act& x, const std::vector<Target>& targets) {
  const int64_t n = x.rows, k = x.cols;
  const bf16* xb = x.as<bf16>();
  if (x.type != ActType::BF16) {
    // Products read bf16 rows; an f32 input is rounded first (no graph path does this today).
    bf16* conv = c_.scratch.matmul_input.get<bf16>(static_cast<std::size_t>(n * k));
    cuda::to_bf16_rows(x.as<float>(), x.ld, conv, k, n, k, c_.stream);
    xb = conv;
  }
  const int64_t ldx = x.type == ActType::BF16 ? x.ld : k;
  // Quantized weights (any mix with bf16 ones, as mixed recipes make) run apart: up to 64 rows
  // (decode batches, short windows) through the quantized weight-streaming launches, which read
  // the packed weights once per 32 rows; longer windows dequantized into bf16 a slice of rows at a
  // time for cuBLAS (writing and reading back bf16 weights costs ~9x the packed 4-bit bytes).
  std::vector<cuda::QuantSegment> quant;
  std::vector<Target> dense;
  for (const auto& t : targets) {
    if (t.w->quantized()) quant.push_back({device_quant(*t.w), t.y, t.ldy, t.accumulate});
    else dense.push_back(t);
  }
  // (Deterministic mode: the head over a window step's last rows goes row by row too.)
  const bool invariant = row_invariant() || (c_.deterministic && n != c_.layout.total_rows);
  if (!quant.empty() && (n <= cuda::kSkinnyQuantMaxRows || invariant)) {
    const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(part), c_.stream, kSkinnyQuant);
    for (int64_t r0 = 0; r0 < n; r0 += cuda::kSkinnyQuantMaxRows) {
      std::vector<cuda::QuantSegment> rows = quant;
      for (auto& q : rows) q.y += r0 * q.ldy;
      cuda::skinny_quant_gemm(xb + r0 * ldx, std::min(cuda::kSkinnyQuantMaxRows, n - r0), k, ldx, rows, c_.stream);
    }
  } else if (!quant.empty()) {
    if (!c_.cublas) c_.cublas = std::make_unique<cuda::CublasGemm>();
    const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(part), c_.stream, kDequantCublas);
    for (const auto& q : quant) {
      // Slices of whole 128-row tiles: a slice boundary elsewhere puts cuBLAS's output at an
      // address (and a width) its fast kernels refuse; the slow ones it then picks made 27B's MLP
      // products 6.5x slower than bf16 (H100, QWENRT_CUDA_PROFILE).
      const int64_t slice = std::min(q.w.rows, std::max<int64_t>(128, kDequantSliceElements / q.w.cols / 128 * 128));
      bf16* wb = c_.scratch.dequant.get<bf16>(static_cast<std::size_t>(slice * q.w.cols));
      for (int64_t r0 = 0; r0 < q.w.rows; r0 += slice) {
        const int64_t rows = std::min(slice, q.w.rows - r0);
        cuda::dequantize_rows(q.w, r0, rows, wb, c_.stream);
        for_row_ranges(n, [&](int64_t b, int64_t m) {
          c_.cublas->gemm(xb + b * ldx, m, k, ldx, wb, rows, q.y + b * q.ldy + r0, q.ldy, q.accumulate, c_.stream);
        });
      }
    }
  }
  if (dense.empty()) return;
  if (n <= kDecodeRows || invariant) {
    // Decode rows: one weight-streaming launch for all targets (more rows, row-invariant: per 64
    // rows, each row's sums in the order of a lone decode row).
    const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(part), c_.stream, kSkinny);
    for (int64_t r0 = 0; r0 < n; r0 += cuda::kSkinnyGemmMaxRows) {
      const int64_t rows = std::min(cuda::kSkinnyGemmMaxRows, n - r0);
      std::vector<cuda::GemmSegment> segs;
      for (const auto& t : dense) segs.push_back({device_bf16(*t.w), t.w->rows, t.y + r0 * t.ldy, t.ldy, t.accumulate});
      cuda::skinny_gemm(xb + r0 * ldx, rows, k, ldx, segs, c_.stream, c_.scratch.gemm_workspace(cuda::skinny_gemm_workspace_bytes(rows, k, segs)));
    }
    return;
  }
  if (!c_.cublas) c_.cublas = std::make_unique<cuda::CublasGemm>();
  const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(part), c_.stream, kCublas);
  // Targets whose weights follow each other on the device and whose outputs sit side by side in one
  // row run as one product: one pass over x instead of several, and no small-N products (b and a).
  const Target* run = nullptr;   // the first target of the product being gathered
  const Weight* last = nullptr;  // its last weight
  int64_t rows = 0;
  auto flush = [&] {
    if (run)
      for_row_ranges(n, [&](int64_t b, int64_t m) {
        c_.cublas->gemm(xb + b * ldx, m, k, ldx, device_bf16(*run->w), rows, run->y + b * run->ldy, run->ldy, run->accumulate, c_.stream);
      });
  };
  for (const auto& t : dense) {
    if (run && follows(*last, *t.w) && t.y == run->y + rows && t.ldy == run->ldy && t.accumulate == run->accumulate) {
      rows += t.w->rows;
      last = t.w;
      continue;
    }
    flush();
    run = &t;
    last = t.w;
    rows = t.w->rows;
  }
  flush();
}

std::vector<Act> CudaOps::matmul(Part part, const Act& x, std::initializer_list<const Weight*> weights) {
  std::vector<Act> out = outputs(part, x.rows, weights);
  std::vector<Target> targets;
  std::size_t i = 0;
  for (const Weight* w : weights) targets.push_back({w, out[i].as<float>(), out[i].ld}), ++i;
  product(part, x, targets);
  return out;
}

std::vector<Act> CudaOps::norm_matmul(Part part, const Act& h, const ParamVector& w, std::initializer_list<const Weight*> weights) {
  const int64_t T = h.rows, H = h.cols;
  // Quantized weights: a norm launch, then the product (the norm is not fused into the quantized
  // launch yet).
  if (!fused_norm(T) || any_quantized(weights)) return matmul(part, rms_norm(Part::Norm, h, w), weights);
  // Decode rows: the weight-streaming launch normalises the residual rows itself (no norm launch).
  std::vector<Act> out = outputs(part, T, weights);
  const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(part), c_.stream, kSkinnyNormed);
  std::vector<cuda::GemmSegment> segs;
  std::size_t i = 0;
  for (const Weight* wt : weights) segs.push_back({device_bf16(*wt), wt->rows, out[i].as<float>(), out[i].ld, false}), ++i;
  const cuda::SkinnyNormedRows x = normed_rows(h, w);
  cuda::skinny_gemm(x, T, H, segs, c_.stream, c_.scratch.gemm_workspace(cuda::skinny_gemm_workspace_bytes(T, H, segs)));
  return out;
}

void CudaOps::matmul_add(Part part, const Act& x, const Weight& w, Act& h) {
  if (h.type != ActType::F32) fail("internal: the residual stream is f32");
  product(part, x, {{&w, h.as<float>(), h.ld, true}});
}

void CudaOps::add(Act& h, const Act& y) {
  if (h.type != ActType::F32 || y.type != ActType::F32 || h.ld != h.cols || y.ld != y.cols) fail("internal: adds packed f32 rows on the GPU");
  cuda::add_in_place(h.as<float>(), y.as<float>(), h.rows * h.cols, c_.stream);
}

Act CudaOps::swiglu(const Act& gate, const Act& up) {
  if (gate.type != ActType::F32 || up.as<float>() != gate.as<float>() + gate.cols || up.ld != gate.ld)
    fail("internal: SwiGLU on the GPU takes gate and up side by side");
  const int64_t T = gate.rows, I = gate.cols;
  bf16* act = c_.scratch.part<bf16>(Part::SwiGlu, static_cast<std::size_t>(T * I));
  const cuda::StreamProfiler::Scope scope(c_.profiler, "swiglu", c_.stream);
  cuda::swiglu_rows(gate.as<float>(), gate.ld, act, I, T, I, c_.stream);
  return {act, ActType::BF16, T, I, I};
}

Act CudaOps::norm_gate_up_swiglu(const Act& h, const ParamVector& w, const Weight& gate, const Weight& up) {
  const int64_t T = h.rows, H = h.cols, I = gate.rows;
  bf16* act = c_.scratch.part<bf16>(Part::SwiGlu, static_cast<std::size_t>(T * I));
  const Act out{act, ActType::BF16, T, I, I};
  if (gate.quantized() || up.quantized()) {
    // Quantized gate/up: norm, the two products side by side, then SwiGLU, as three launches (not
    // fused yet).
    const std::vector<Act> gu = matmul(Part::GateUp, rms_norm(Part::Norm, h, w), {&gate, &up});
    return swiglu(gu[0], gu[1]);
  }
  if (fused_norm(T)) {
    // Decode rows: post-attention norm, gate, up and silu(gate)·up in one weight-streaming launch.
    const cuda::StreamProfiler::Scope scope(c_.profiler, "gate/up, swiglu", c_.stream, kSkinnyNormed);
    const cuda::SkinnyNormedRows x = normed_rows(h, w);
    cuda::skinny_gemm_swiglu(x, T, H, device_bf16(gate), device_bf16(up), I, act, I, c_.stream,
                             c_.scratch.gemm_workspace(cuda::skinny_gemm_swiglu_workspace_bytes(T, H, I)));
    return out;
  }
  const Act xn = rms_norm(Part::Norm, h, w);
  if (T <= kDecodeRows || row_invariant()) {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "gate/up, swiglu", c_.stream, kSkinny);
    for (int64_t r0 = 0; r0 < T; r0 += cuda::kSkinnyGemmMaxRows) {
      const int64_t rows = std::min(cuda::kSkinnyGemmMaxRows, T - r0);
      cuda::skinny_gemm_swiglu(xn.as<bf16>() + r0 * H, rows, H, H, device_bf16(gate), device_bf16(up), I, act + r0 * I, I, c_.stream,
                               c_.scratch.gemm_workspace(cuda::skinny_gemm_swiglu_workspace_bytes(rows, H, I)));
    }
    return out;
  }
  // Prompt rows: gate and up rounded to bf16 by cuBLAS (as a bf16 model computes them), which halves
  // the bytes the largest product writes and the activation reads.
  bf16* gu = c_.scratch.gate_up.get<bf16>(static_cast<std::size_t>(T * 2 * I));
  {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "gate/up", c_.stream, kCublas);
    if (!c_.cublas) c_.cublas = std::make_unique<cuda::CublasGemm>();
    for_row_ranges(T, [&](int64_t b, int64_t m) {
      const bf16* x = xn.as<bf16>() + b * H;
      bf16* y = gu + b * 2 * I;
      if (follows(gate, up)) {
        c_.cublas->gemm(x, m, H, H, device_bf16(gate), 2 * I, y, 2 * I, c_.stream);  // one product
      } else {
        c_.cublas->gemm(x, m, H, H, device_bf16(gate), I, y, 2 * I, c_.stream);
        c_.cublas->gemm(x, m, H, H, device_bf16(up), I, y + I, 2 * I, c_.stream);
      }
    });
  }
  const cuda::StreamProfiler::Scope scope(c_.profiler, "swiglu", c_.stream);
  cuda::swiglu_rows(gu, 2 * I, act, I, T, I, c_.stream);
  return out;
}

Act CudaOps::gated_deltanet(const DeltaNetWeights& w, int gdn_layer, const Act& qkv, const Act& z, const Act& b, const Act& a) {
  const ModelConfig& c = c_.config;
  const int64_t T = qkv.rows, nv = c.linear_num_value_heads, vd = c.value_dim();
  if (a.as<float>() != b.as<float>() + nv || a.ld != b.ld) fail("internal: the DeltaNet kernels take a beside b");
  bf16* o = c_.scratch.part<bf16>(Part::DeltaNet, static_cast<std::size_t>(T * vd));
  cuda::DeltaNetDecodeArgs args;
  args.ld_qkv = qkv.ld;
  args.ld_z = z.ld;
  args.ld_ba = b.ld;
  args.conv_w = device_f32(w.conv);
  args.neg_exp_a = device_f32(w.neg_exp_a);
  args.dt_bias = device_f32(w.dt_bias);
  args.norm_w = device_f32(w.norm);
  args.eps = static_cast<float>(c.rms_norm_eps);
  args.conv_state = c_.cache.gdn.as<float>() + gdn_layer * c_.cache.gdn_layer_floats;
  args.rec_state = args.conv_state + c_.cache.conv_floats;
  args.conv_slot_stride = args.rec_slot_stride = c_.cache.slot_floats;
  args.ld_out = vd;
  args.nk = static_cast<int>(c.linear_num_key_heads);
  args.nv = static_cast<int>(nv);
  args.dk = static_cast<int>(c.linear_key_head_dim);
  args.dv = static_cast<int>(c.linear_value_head_dim);
  args.K = static_cast<int>(c.linear_conv_kernel);
  args.qkv = qkv.as<float>();
  args.z = z.as<float>();
  args.b = b.as<float>();
  args.a = a.as<float>();
  args.out = o;
  if (c_.layout.phase != Phase::Window) {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "deltanet step", c_.stream);
    args.slots = c_.rows.row_slot;
    args.positions = c_.rows.pos64;
    args.keep = c_.rows.keep;
    args.keep_conv_offset = gdn_layer * c_.cache.gdn_layer_floats;
    args.keep_rec_offset = args.keep_conv_offset + c_.cache.conv_floats;
    if (c_.layout.phase == Phase::Decode) {
      args.B = static_cast<int>(T);
      cuda::deltanet_decode(args, c_.stream);
    } else {
      // Committed rows: row j of every sequence in launch j, each launch the decode step of its rows.
      const int32_t* launch_rows = c_.rows.committed_rows;
      for (int n : committed_launch_rows(c_.layout)) {
        args.rows = launch_rows;
        args.B = n;
        cuda::deltanet_decode(args, c_.stream);
        launch_rows += n;
      }
    }
  } else {
    // Windows: the leading one-row spans (decode rows riding along) as a decode step, then the
    // chunked form over the other spans at once (laid out once per step by the executor).
    const int64_t D = c_.window_decode_rows;
    if (D > 0) {
      const cuda::StreamProfiler::Scope scope(c_.profiler, "deltanet step", c_.stream);
      args.slots = c_.rows.row_slot;
      args.positions = c_.rows.pos64;
      args.B = static_cast<int>(D);
      cuda::deltanet_decode(args, c_.stream);
    }
    if (D < T) {
      const cuda::StreamProfiler::Scope scope(c_.profiler, "deltanet chunked", c_.stream);
      if (!c_.window) fail("internal: a DeltaNet window without its plan");
      cuda::deltanet_prefill(args, *c_.window, c_.stream);
    }
  }
  return {o, ActType::BF16, T, vd, vd};
}

Act CudaOps::gated_attention(const AttentionWeights& w, int attn_layer, const Act& qg, const Act& k, const Act& v) {
  const ModelConfig& c = c_.config;
  const int64_t T = qg.rows, Nq = c.num_heads, Nkv = c.num_kv_heads, Dh = c.head_dim;
  if (qg.ld != 2 * Nq * Dh || k.ld != Nkv * Dh || v.ld != Nkv * Dh) fail("internal: the attention kernels take packed q/gate, k and v rows");
  bf16* q = c_.scratch.attention_q.get<bf16>(static_cast<std::size_t>(T * Nq * Dh));
  bf16* out = c_.scratch.part<bf16>(Part::Attention, static_cast<std::size_t>(T * Nq * Dh));
  cuda::PagedKv kv;
  kv.k = c_.cache.k_pool[static_cast<std::size_t>(attn_layer)].as<bf16>();
  kv.v = c_.cache.v_pool[static_cast<std::size_t>(attn_layer)].as<bf16>();
  kv.num_blocks = c_.cache.pool_blocks;
  kv.block_size = static_cast<int>(c_.shape.block_size);
  kv.num_kv_heads = static_cast<int>(Nkv);
  kv.head_dim = static_cast<int>(Dh);
  kv.block_tables = c_.rows.block_tables;
  kv.max_blocks_per_seq = c_.shape.max_blocks_per_seq;
  const cuda::AttentionRows rows{c_.rows.pos32, c_.rows.row_seq, T};
  const cuda::QkNormRope norm{device_f32(w.q_norm), device_f32(w.k_norm), static_cast<float>(c.rms_norm_eps), static_cast<int>(c.rotary_dim),
                              c.rope_theta};
  // Decode rows: every row of a decode or committed step (committed rows: each query a decode row
  // with its own table row), and a window's leading one-row spans (table row = span = row).
  const int64_t decode_rows = c_.layout.phase != Phase::Window ? T : c_.window_decode_rows;
  const cuda::StreamProfiler::Scope scope(c_.profiler, decode_rows == T ? "attention decode" : "attention prefill", c_.stream);
  cuda::attention_prepare(rows, qg.as<float>(), k.as<float>(), v.as<float>(), static_cast<int>(Nq), norm, kv, q, c_.stream);
  if (decode_rows > 0) {
    const std::size_t ws_bytes = cuda::attention_decode_workspace_bytes(decode_rows, static_cast<int>(Nq), c_.shape.max_len);
    void* ws = c_.scratch.attention_splits.get<std::byte>(ws_bytes);
    cuda::attention_decode(q, qg.as<float>(), rows.positions, decode_rows, static_cast<int>(Nq), c_.shape.max_len, kv, ws, ws_bytes, out, c_.stream,
                           c_.layout.phase == Phase::Committed);
  }
  if (decode_rows < T) {
    // The window's other spans: sequence s of the launch is span decode_rows + s (its table row).
    cuda::PagedKv rest = kv;
    rest.block_tables += decode_rows * kv.max_blocks_per_seq;
    const cuda::PrefillWindows windows{c_.rows.span_first + decode_rows, rows.positions,
                                       static_cast<int>(static_cast<int64_t>(c_.layout.spans.size()) - decode_rows), T - decode_rows};
    cuda::attention_prefill(q, qg.as<float>(), windows, static_cast<int>(Nq), rest, out, c_.stream);
  }
  return {out, ActType::BF16, T, Nq * Dh, Nq * Dh};
}

namespace {

// The layer's experts as the MoE kernels read them (model/cuda/cuda_weights.cpp stacked them).
cuda::MoeExperts moe_experts(const ModelConfig& c, const MoeWeights& w) {
  cuda::MoeExperts ex;
  ex.experts = static_cast<int>(w.experts.size());
  ex.top_k = static_cast<int>(c.experts_per_token);
  ex.shared = w.has_shared;
  ex.hidden = c.hidden_size;
  ex.inter = w.experts[0].gate.rows;
  ex.slots = ex.top_k + (ex.shared ? 1 : 0);
  if (w.experts[0].gate.bound.format != WeightFormat::BF16) {
    // Packed stacks (cuda_weights.cpp): expert 0's matrices extended over every expert's rows.
    const int64_t stacked = ex.experts + (ex.shared ? 1 : 0);
    ex.packed = true;
    ex.gate_up_packed = device_quant(w.experts[0].gate);
    ex.gate_up_packed.rows = stacked * 2 * ex.inter;
    ex.down_packed = device_quant(w.experts[0].down);
    ex.down_packed.rows = stacked * ex.hidden;
    const MlpWeights& last = ex.shared ? w.shared : w.experts.back();
    const auto* base = static_cast<const uint8_t*>(ex.gate_up_packed.data);
    const auto* dbase = static_cast<const uint8_t*>(ex.down_packed.data);
    const bool contiguous = last.gate.bound.data == base + (stacked - 1) * 2 * ex.inter * ex.gate_up_packed.row_bytes() &&
                            last.up.bound.data == base + ((stacked - 1) * 2 + 1) * ex.inter * ex.gate_up_packed.row_bytes() &&
                            last.down.bound.data == dbase + (stacked - 1) * ex.hidden * ex.down_packed.row_bytes() &&
                            (!ex.shared || device_bf16(w.shared_gate) == device_bf16(w.router) + ex.experts * ex.hidden);
    if (!contiguous) fail("internal: the packed experts of a MoE layer are not stacked on the GPU");
    return ex;
  }
  ex.gate_up = device_bf16(w.experts[0].gate);
  ex.down = device_bf16(w.experts[0].down);
  const int64_t last = ex.experts - 1, gu_stride = 2 * ex.inter * ex.hidden, down_stride = ex.hidden * ex.inter;
  const bool stacked = device_bf16(w.experts.back().gate) == ex.gate_up + last * gu_stride &&
                       device_bf16(w.experts.back().up) == ex.gate_up + last * gu_stride + ex.inter * ex.hidden &&
                       device_bf16(w.experts.back().down) == ex.down + last * down_stride &&
                       (!ex.shared || (device_bf16(w.shared.gate) == ex.gate_up + ex.experts * gu_stride &&
                                       device_bf16(w.shared.down) == ex.down + ex.experts * down_stride &&
                                       device_bf16(w.shared_gate) == device_bf16(w.router) + ex.experts * ex.hidden));
  if (!stacked) fail("internal: the experts of a MoE layer are not stacked on the GPU");
  return ex;
}

}  // namespace

Act CudaOps::moe(const MoeWeights& w, const Act& x) {
  const int64_t T = x.rows, H = x.cols;
  float* y = c_.scratch.part<float>(Part::Moe, static_cast<std::size_t>(T * H), 0);
  moe_into(w, x, y, H, false);
  return {y, ActType::F32, T, H, H};
}

void CudaOps::moe_add(const MoeWeights& w, const Act& x, Act& h) {
  if (h.type != ActType::F32 || h.rows != x.rows || h.cols != x.cols) fail("internal: the residual stream is f32 rows of the MoE's width");
  moe_into(w, x, h.as<float>(), h.ld, true);
}

void CudaOps::norm_moe_add(const ParamVector& w, const MoeWeights& moe, Act& h) {
  const int64_t T = h.rows, H = h.cols;
  if (!fused_norm(T)) return Ops::norm_moe_add(w, moe, h);
  if (h.type != ActType::F32) fail("internal: the residual stream is f32");
  bf16* x = c_.scratch.part<bf16>(Part::Norm, static_cast<std::size_t>(T * H));
  cuda::SkinnyNormedRows normed = normed_rows(h, w);
  normed.out = x;  // the router product stores the rows for the experts
  normed.ld_out = H;
  moe_into(moe, {x, ActType::BF16, T, H, H}, h.as<float>(), h.ld, true, &normed);
}

// y[r · ldy + d] = MoE(x) (+= with accumulate: the sum's last launch adds it).
void CudaOps::moe_into(const MoeWeights& w, const Act& x, float* y, int64_t ldy, bool accumulate, const cuda::SkinnyNormedRows* normed) {
  if (x.type != ActType::BF16) fail("internal: the MoE reads normalised bf16 rows on the GPU");
  const int64_t T = x.rows, H = x.cols;
  const cuda::MoeExperts ex = moe_experts(c_.config, w);
  // Router logits, and the shared expert's gate logit beside them as column E (its weight row
  // follows the router's on the device), then zero columns to a multiple of 8: one product.
  Weight router = w.router;
  router.rows = cuda::moe_router_rows(ex.experts, ex.shared);
  router.format = WeightFormat::BF16;  // stacked in bf16 on the device whatever the checkpoint's format
  const int64_t ld = router.rows;
  float* logits = c_.scratch.part<float>(Part::Moe, static_cast<std::size_t>(T * ld), 1);
  if (normed) {
    const cuda::StreamProfiler::Scope scope(c_.profiler, part_name(Part::Moe), c_.stream, kSkinnyNormed);
    const std::vector<cuda::GemmSegment> segs{{device_bf16(router), router.rows, logits, ld, false}};
    cuda::skinny_gemm(*normed, T, H, segs, c_.stream, c_.scratch.gemm_workspace(cuda::skinny_gemm_workspace_bytes(T, H, segs)));
  } else {
    product(Part::Moe, x, {{&router, logits, ld}});
  }
  const int64_t slots = ex.slots;
  int32_t* ids = c_.scratch.moe_route.get<int32_t>(static_cast<std::size_t>(2 * T * slots));
  float* weights = reinterpret_cast<float*>(ids + T * slots);
  {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "moe route", c_.stream);
    cuda::moe_route(logits, ld, T, ex, ids, weights, c_.stream);
  }
  if (T <= cuda::kMoeDecodeRows || (row_invariant() && !ex.packed)) {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "moe experts (decode)", c_.stream);
    const int64_t chunk = cuda::kMoeDecodeRows;
    bf16* act = c_.scratch.moe_work.get<bf16>(cuda::moe_decode_act_bytes(std::min(T, chunk), ex) / sizeof(bf16));
    for (int64_t r0 = 0; r0 < T; r0 += chunk)
      cuda::moe_decode(x.as<bf16>() + r0 * x.ld, x.ld, std::min(chunk, T - r0), ex, ids + r0 * slots, weights + r0 * slots, act, y + r0 * ldy, ldy,
                       accumulate, c_.stream);
  } else if (ex.packed && (T <= kPackedMoeDecodeRows || row_invariant())) {
    // Packed experts in batches of up to 64 rows (and any window that must be row-invariant): each
    // chosen expert's packed rows read once for up to four of its pairs, every row the bits
    // moe_decode gives it. By bytes (35B-A3B q4, a layer at 64 rows): the ~221 chosen experts'
    // rows, about 0.4 GB, where widening the whole stacks to bf16 for the grouped GEMMs reads 0.45 and
    // writes 1.6 GB before its products.
    const cuda::StreamProfiler::Scope scope(c_.profiler, "moe experts (packed, grouped)", c_.stream);
    const int64_t chunk = kPackedMoeDecodeRows;
    void* scratch = c_.scratch.moe_work.get<std::byte>(cuda::moe_decode_grouped_scratch_bytes(std::min(T, chunk), ex));
    for (int64_t r0 = 0; r0 < T; r0 += chunk)
      cuda::moe_decode_grouped(x.as<bf16>() + r0 * x.ld, x.ld, std::min(chunk, T - r0), ex, ids + r0 * slots, weights + r0 * slots, scratch,
                               y + r0 * ldy, ldy, accumulate, c_.stream);
  } else {
    const cuda::StreamProfiler::Scope scope(c_.profiler, "moe experts (grouped)", c_.stream);
    // Packed experts: the layer's stacks widened to bf16 once per window for the grouped GEMMs.
    const cuda::MoeExperts grouped =
        ex.packed ? cuda::moe_dequantize(ex, c_.scratch.dequant.get<std::byte>(cuda::moe_dequantized_bytes(ex)), c_.stream) : ex;
    void* scratch = c_.scratch.moe_work.get<std::byte>(cuda::moe_window_scratch_bytes(T, grouped));
    cuda::moe_window(x.as<bf16>(), x.ld, T, grouped, ids, weights, scratch, y, ldy, accumulate, c_.stream);
  }
}

Act CudaOps::hidden_rows(const Act& x, const ParamVector& w, const Act& logit_rows) {
  if (!c_.layout.hidden_all) return logit_rows;
  const int64_t T = x.rows, H = x.cols;
  bf16* y = c_.scratch.part<bf16>(Part::HiddenRows, static_cast<std::size_t>(T * H));
  cuda::rms_norm_rows(x.as<float>(), x.ld, device_f32(w), y, H, T, H, static_cast<float>(c_.config.rms_norm_eps), c_.stream, nullptr,
                      {c_.rows.health, final_norm_site(c_.config)});
  return {y, ActType::BF16, T, H, H};
}

Act CudaOps::given_hidden() {
  const int64_t T = c_.layout.total_rows, H = c_.config.hidden_size;
  float* h = c_.scratch.part<float>(Part::MtpConcat, static_cast<std::size_t>(T * H), 1);
  // MTP steps run eagerly (they take host rows), so pageable copies in the stream are fine here.
  for (std::size_t i = 0; i < c_.step.sequences.size(); ++i) {
    const StepSequence& s = c_.step.sequences[i];
    const auto& sp = c_.layout.spans[i];
    if (s.hidden_in.size() != static_cast<std::size_t>(sp.rows * H)) fail("internal: an MTP step without its hidden rows");
    QWENRT_CUDA_CHECK(
        cudaMemcpyAsync(h + sp.first_row * H, s.hidden_in.data(), s.hidden_in.size() * sizeof(float), cudaMemcpyHostToDevice, c_.stream));
  }
  return {h, ActType::F32, T, H, H};
}

Act CudaOps::concat(Part part, const Act& a, const Act& b) {
  if (a.type != b.type || a.rows != b.rows) fail("internal: concat of rows of different types or counts");
  const std::size_t es = a.type == ActType::BF16 ? sizeof(bf16) : sizeof(float);
  const int64_t T = a.rows, W = a.cols + b.cols;
  std::byte* y = c_.scratch.part<std::byte>(part, static_cast<std::size_t>(T * W) * es);
  QWENRT_CUDA_CHECK(cudaMemcpy2DAsync(y, W * es, a.data, a.ld * es, a.cols * es, T, cudaMemcpyDeviceToDevice, c_.stream));
  QWENRT_CUDA_CHECK(cudaMemcpy2DAsync(y + a.cols * es, W * es, b.data, b.ld * es, b.cols * es, T, cudaMemcpyDeviceToDevice, c_.stream));
  return {y, a.type, T, W, W};
}

Act CudaOps::norm_logit_rows(const Act& x, const ParamVector& w) {
  const int64_t R = static_cast<int64_t>(c_.layout.logit_rows.size()), H = x.cols;
  bf16* xf = c_.scratch.part<bf16>(Part::FinalNorm, static_cast<std::size_t>(R * H));
  cuda::rms_norm_rows(x.as<float>(), x.ld, device_f32(w), xf, H, R, H, static_cast<float>(c_.config.rms_norm_eps), c_.stream, c_.rows.logit_rows,
                      {c_.rows.health, final_norm_site(c_.config)});
  return {xf, ActType::BF16, R, H, H};
}

}  // namespace qwenrt
