#include "model/cuda/cuda_weights.h"

#include <unistd.h>

#include <cstdio>
#include <map>

#include "backend/cuda/diagnostics/device_measure.h"
#include "core/error.h"
#include "core/half.h"

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

  CudaMatrix matrix(const WeightMatrix& m) {
    const std::pair<const std::byte*, uint64_t> key{m.data, m.random_seed};
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    const std::size_t n = static_cast<std::size_t>(m.rows * m.cols);
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (!arena_.get()) {
      // sizing only
    } else if (!m.data) {
      if (m.random_seed == 0) fail("internal: weight matrix without data or seed");
      cuda::fill_uniform_bf16(reinterpret_cast<__nv_bfloat16*>(dst), n, m.random_scale, m.random_seed, nullptr);
    } else if (m.dtype == DType::BF16) {
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
    CudaMatrix cm{reinterpret_cast<const __nv_bfloat16*>(arena_.as<std::byte>() + offset_), m.rows, m.cols};
    offset_ += aligned(n * 2);
    seen_[key] = cm;
    return cm;
  }

  const float* vector(const std::vector<float>& v) {
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (arena_.get()) copy(dst, v.data(), v.size() * 4);
    offset_ += aligned(v.size() * 4);
    return reinterpret_cast<const float*>(dst);
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
        std::fprintf(stderr, "\r\033[Kuploading weights %5.1f%% (%.2f of %.2f GiB)", 100.0 * static_cast<double>(copied_) / static_cast<double>(total_),
                     static_cast<double>(copied_) / (1u << 30), static_cast<double>(total_) / (1u << 30));
    }
  }

  std::size_t total_ = 0, offset_ = 0, copied_ = 0;
  bool show_ = false;
  cuda::DeviceBuffer arena_;
  std::map<std::pair<const std::byte*, uint64_t>, CudaMatrix> seen_;
};

// Every tensor of the model through the uploader, in one fixed order.
CudaWeights bind(const ModelWeights& weights, Uploader& up) {
  CudaWeights cw;
  cw.embed = up.matrix(weights.embed);
  cw.lm_head = up.matrix(weights.lm_head);
  cw.final_norm = up.vector(weights.final_norm);
  for (const auto& L : weights.layers) {
    CudaLayerWeights c;
    c.kind = L.kind;
    c.input_norm = up.vector(L.input_norm);
    c.post_norm = up.vector(L.post_norm);
    if (L.kind == LayerKind::LinearAttention) {
      c.in_qkv = up.matrix(L.gdn.in_qkv);
      c.in_z = up.matrix(L.gdn.in_z);
      c.in_b = up.matrix(L.gdn.in_b);
      c.in_a = up.matrix(L.gdn.in_a);
      c.out_proj = up.matrix(L.gdn.out_proj);
      c.conv = up.vector(L.gdn.conv);
      c.dt_bias = up.vector(L.gdn.dt_bias);
      c.neg_exp_a = up.vector(L.gdn.neg_exp_a);
      c.gdn_norm = up.vector(L.gdn.norm);
    } else {
      c.q_proj = up.matrix(L.attn.q_proj);
      c.k_proj = up.matrix(L.attn.k_proj);
      c.v_proj = up.matrix(L.attn.v_proj);
      c.o_proj = up.matrix(L.attn.o_proj);
      c.q_norm = up.vector(L.attn.q_norm);
      c.k_norm = up.vector(L.attn.k_norm);
    }
    c.gate = up.matrix(L.mlp.gate);
    c.up = up.matrix(L.mlp.up);
    c.down = up.matrix(L.mlp.down);
    cw.layers.push_back(c);
  }
  return cw;
}

}  // namespace

CudaWeights upload_weights(const ModelWeights& weights) {
  Uploader sizing;
  bind(weights, sizing);
  const std::size_t total = sizing.laid_out();
  std::size_t free_bytes = 0, device_total = 0;
  QWENRT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &device_total));
  // Leave room for activations, the caches and cuBLAS's workspace.
  const std::size_t headroom = std::size_t{1} << 30;
  if (total + headroom > free_bytes)
    fail("--device cuda: the weights need ", (total >> 20) + 1, " MiB in bf16 plus ~1 GiB of working memory, and the GPU has ",
         free_bytes >> 20, " MiB free of ", device_total >> 20, " MiB; use a smaller model, a quantized one, or --device cpu");
  Uploader up(total);
  CudaWeights cw = bind(weights, up);
  cw.arena = up.take();
  return cw;
}

}  // namespace qwenrt
