#include "model/cuda/cuda_weights.h"

#include <unistd.h>

#include <cuda_bf16.h>

#include <cstdio>
#include <map>

#include "backend/cuda/diagnostics/device_measure.h"
#include "core/error.h"
#include "core/half.h"
#include "model/cuda/quant_upload.h"

namespace qwenrt {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Lays out and copies every tensor into one arena; matrices shared by two roles (a tied head) once.
// Without an arena it only lays out: the same walk over the weights first sizes the arena, then
// fills it.
class Uploader {
 public:
  Uploader() = default;
  explicit Uploader(std::size_t total_bytes) : total_(total_bytes), show_(isatty(STDERR_FILENO) != 0), arena_(total_bytes) {}

  std::size_t laid_out() const { return offset_; }

  // The weight's bf16 copy: bf16 copied as it is, f16/f32 rounded once here. Quantized weights
  // stay packed (quant_upload.h).
  BoundWeight matrix(const Weight& m) {
    const std::pair<const std::byte*, uint64_t> key{m.data, m.random_seed};
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    if (m.quantized()) return packed(m, key);
    const std::size_t n = static_cast<std::size_t>(m.rows * m.cols);
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (!arena_.get()) {
      // sizing only
    } else if (!m.data) {
      if (m.random_seed == 0) fail("internal: weight matrix without data or seed");
      cuda::fill_uniform_bf16(reinterpret_cast<__nv_bfloat16*>(dst), n, m.random_scale, m.random_seed, nullptr);
    } else if (m.format == WeightFormat::BF16) {
      copy(dst, m.data, n * 2);
    } else {
      // Round f16/f32 rows to bf16 a slice at a time.
      std::vector<float> row(static_cast<std::size_t>(m.cols));
      std::vector<uint16_t> out;
      out.reserve(static_cast<std::size_t>(m.cols) * 64);
      for (int64_t r = 0; r < m.rows; ++r) {
        m.row_to_f32(r, row.data());
        for (float v : row) out.push_back(f32_to_bf16(v));
        if (out.size() >= static_cast<std::size_t>(m.cols) * 64 || r + 1 == m.rows) {
          copy(dst, out.data(), out.size() * 2);
          dst += out.size() * 2;
          out.clear();
        }
      }
    }
    const BoundWeight bound{WeightFormat::BF16, arena_.as<std::byte>() + offset_};
    offset_ += aligned(n * 2);
    seen_[key] = bound;
    return bound;
  }

  const float* vector(const ParamVector& v) {
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (arena_.get()) copy(dst, v.data(), v.size() * 4);
    offset_ += aligned(v.size() * 4);
    return reinterpret_cast<const float*>(dst);
  }

  BoundWeight packed(const Weight& m, const std::pair<const std::byte*, uint64_t>& key) {
    const PackedParts parts = packed_parts(m);
    std::byte* base = arena_.as<std::byte>();
    std::byte* data = base + offset_;
    std::byte* scales = data + aligned(parts.data);
    std::byte* biases = scales + aligned(parts.scales);
    BoundWeight bound;
    if (arena_.get()) bound = upload_packed(m, data, scales, biases, [this](std::byte* dst, const void* src, std::size_t n) { copy(dst, src, n); });
    offset_ += aligned(parts.data) + aligned(parts.scales) + aligned(parts.biases);
    seen_[key] = bound;
    return bound;
  }

  cuda::DeviceBuffer take() {
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());  // the on-device fills of synthetic weights
    if (show_) std::fprintf(stderr, "\r\033[Kuploaded %.2f GiB\n", static_cast<double>(total_) / (1u << 30));
    return std::move(arena_);
  }

 private:
  void copy(std::byte* dst, const void* src, std::size_t bytes) {
    // Pieces of 64 MiB keep the progress bar moving and the page cache streaming from the mmap.
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min<std::size_t>(bytes - done, std::size_t{64} << 20);
      QWENRT_CUDA_CHECK(cudaMemcpy(dst + done, static_cast<const std::byte*>(src) + done, n, cudaMemcpyHostToDevice));
      done += n;
      copied_ += n;
      if (show_)
        std::fprintf(stderr, "\r\033[Kuploading weights %5.1f%% (%.2f of %.2f GiB)",
                     100.0 * static_cast<double>(copied_) / static_cast<double>(total_), static_cast<double>(copied_) / (1u << 30),
                     static_cast<double>(total_) / (1u << 30));
    }
  }

  std::size_t total_ = 0, offset_ = 0, copied_ = 0;
  bool show_ = false;
  cuda::DeviceBuffer arena_;
  std::map<std::pair<const std::byte*, uint64_t>, BoundWeight> seen_;
};

// Every tensor of the model through the uploader, in one fixed order (with `record`, each weight's
// and vector's `bound` is set). A layer's DeltaNet in_proj weights, and gate and up, follow each
// other in the arena: prompt rows take each group as one product.
void bind(ModelWeights& weights, Uploader& up, bool record) {
  auto matrix = [&](Weight& w) {
    const BoundWeight b = up.matrix(w);
    if (record) w.bound = b;
  };
  auto vector = [&](ParamVector& v) {
    const float* b = up.vector(v);
    if (record) v.bound = b;
  };
  matrix(weights.embed);
  matrix(weights.lm_head);
  vector(weights.final_norm);
  for (auto& L : weights.layers) {
    vector(L.input_norm);
    vector(L.post_norm);
    if (L.kind == LayerKind::LinearAttention) {
      for (Weight* w : {&L.gdn.in_qkv, &L.gdn.in_z, &L.gdn.in_b, &L.gdn.in_a, &L.gdn.out_proj}) matrix(*w);
      for (ParamVector* v : {&L.gdn.conv, &L.gdn.dt_bias, &L.gdn.neg_exp_a, &L.gdn.norm}) vector(*v);
    } else {
      for (Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj}) matrix(*w);
      for (ParamVector* v : {&L.attn.q_norm, &L.attn.k_norm}) vector(*v);
    }
    for (Weight* w : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) matrix(*w);
  }
}

}  // namespace

cuda::DeviceBuffer upload_weights(ModelWeights& weights) {
  Uploader sizing;
  bind(weights, sizing, /*record=*/false);
  const std::size_t total = sizing.laid_out();
  std::size_t free_bytes = 0, device_total = 0;
  QWENRT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &device_total));
  // Leave room for activations, the caches and cuBLAS's workspace.
  const std::size_t headroom = std::size_t{1} << 30;
  if (total + headroom > free_bytes)
    fail("--device cuda: the weights need ", (total >> 20) + 1,
         " MiB (bf16, or packed where quantized) plus ~1 GiB of working memory, and the GPU has ", free_bytes >> 20, " MiB free of ",
         device_total >> 20, " MiB; use a smaller model, a quantized one, or --device cpu");
  Uploader up(total);
  bind(weights, up, /*record=*/true);
  return up.take();
}

}  // namespace qwenrt
