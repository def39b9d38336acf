#include "model/cuda/cuda_weights.h"

#include <unistd.h>

#include <cuda_bf16.h>

#include <cstdio>
#include <map>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
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
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (arena_.get()) write(m, dst, m.cols);
    const BoundWeight bound{WeightFormat::BF16, dst};
    offset_ += aligned(static_cast<std::size_t>(m.rows * m.cols) * 2);
    seen_[key] = bound;
    return bound;
  }

  // Matrices one after another with no gap between them (the stacked layouts the MoE kernels index
  // by expert): piece i takes rows[i] rows of ld[i] bf16, the weight in its top-left corner and
  // zeros around it. Where each piece starts.
  struct Piece {
    const Weight* w;
    int64_t rows, ld;
  };
  std::vector<BoundWeight> stacked(const std::vector<Piece>& pieces) {
    std::vector<BoundWeight> out;
    std::size_t bytes = 0;
    bool padded = false;
    for (const Piece& p : pieces) {
      if (p.w->rows > p.rows || p.w->cols > p.ld) fail("internal: a stacked weight larger than its place");
      padded |= p.w->rows != p.rows || p.w->cols != p.ld;
      out.push_back({WeightFormat::BF16, arena_.as<std::byte>() + offset_ + bytes});
      bytes += static_cast<std::size_t>(p.rows * p.ld) * 2;
    }
    if (arena_.get()) {
      if (padded) QWENRT_CUDA_CHECK(cudaMemset(arena_.as<std::byte>() + offset_, 0, bytes));
      for (std::size_t i = 0; i < pieces.size(); ++i) write(*pieces[i].w, static_cast<std::byte*>(const_cast<void*>(out[i].data)), pieces[i].ld);
    }
    offset_ += aligned(bytes);
    return out;
  }

  // Quantized matrices of one format one after another, packed (the stacked layout the packed
  // expert kernels index by expert): the fields of all, then the scales of all, then the biases, so
  // that each part of the stack reads as one matrix (row-major: those kernels read rows, not the
  // decode tiles). Where each piece starts.
  std::vector<BoundWeight> stacked_packed(const std::vector<const Weight*>& pieces) {
    constexpr bool kTiles = false;
    PackedParts total{};
    for (const Weight* w : pieces) {
      const PackedParts p = packed_parts(*w, kTiles);
      total.data += p.data, total.scales += p.scales, total.biases += p.biases;
    }
    std::byte* data = arena_.as<std::byte>() + offset_;
    std::byte* scales = data + aligned(total.data);
    std::byte* biases = scales + aligned(total.scales);
    std::vector<BoundWeight> out;
    for (const Weight* w : pieces) {
      const PackedParts p = packed_parts(*w, kTiles);
      BoundWeight b;
      if (arena_.get())
        b = upload_packed(*w, kTiles, data, scales, biases, [this](std::byte* dst, const void* src, std::size_t n) { copy(dst, src, n); });
      else b.data = data;
      out.push_back(b);
      data += p.data, scales += p.scales, biases += p.biases;
    }
    offset_ += aligned(total.data) + aligned(total.scales) + aligned(total.biases);
    return out;
  }

  const float* vector(const ParamVector& v) {
    std::byte* dst = arena_.as<std::byte>() + offset_;
    if (arena_.get()) copy(dst, v.data(), v.size() * 4);
    offset_ += aligned(v.size() * 4);
    return reinterpret_cast<const float*>(dst);
  }

  // A matrix of its own: 4-bit weights in the decode kernel's tensor-core tiles where they fit.
  BoundWeight packed(const Weight& m, const std::pair<const std::byte*, uint64_t>& key) {
    constexpr bool kTiles = true;
    const PackedParts parts = packed_parts(m, kTiles);
    std::byte* base = arena_.as<std::byte>();
    std::byte* data = base + offset_;
    std::byte* scales = data + aligned(parts.data);
    std::byte* biases = scales + aligned(parts.scales);
    BoundWeight bound;
    if (arena_.get())
      bound = upload_packed(m, kTiles, data, scales, biases, [this](std::byte* dst, const void* src, std::size_t n) { copy(dst, src, n); });
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
  // m as bf16 rows of `ld` elements at dst (ld >= m.cols; what lies beyond m.cols is not written).
  // Quantized weights come here only as MoE experts (the stacked layout the expert kernels read):
  // dequantized once, each value rounded to bf16.
  void write(const Weight& m, std::byte* dst, int64_t ld) {
    const std::size_t n = static_cast<std::size_t>(m.rows * m.cols);
    if (!m.data) {
      if (m.random_seed == 0) fail("internal: weight matrix without data or seed");
      if (ld == m.cols) {
        cuda::fill_uniform_bf16(reinterpret_cast<__nv_bfloat16*>(dst), n, m.random_scale, m.random_seed, nullptr);
        return;
      }
      cuda::DeviceBuffer tmp(n * 2);
      cuda::fill_uniform_bf16(tmp.as<__nv_bfloat16>(), n, m.random_scale, m.random_seed, nullptr);
      QWENRT_CUDA_CHECK(cudaMemcpy2D(dst, static_cast<std::size_t>(ld) * 2, tmp.get(), static_cast<std::size_t>(m.cols) * 2,
                                     static_cast<std::size_t>(m.cols) * 2, static_cast<std::size_t>(m.rows), cudaMemcpyDeviceToDevice));
      return;
    }
    if (m.format == WeightFormat::BF16 && ld == m.cols) {
      copy(dst, m.data, n * 2);
      return;
    }
    // Rows rounded to bf16 (f16/f32, or dequantized) or laid out at another stride, a slice of rows
    // at a time, converted in parallel.
    const int64_t slice = std::max<int64_t>(1, (int64_t{4} << 20) / ld);
    std::vector<uint16_t> out(static_cast<std::size_t>(ld * slice));
    for (int64_t r0 = 0; r0 < m.rows; r0 += slice) {
      const int64_t rows = std::min(slice, m.rows - r0);
      ThreadPool::global().parallel_for(static_cast<std::size_t>(rows), 16, [&](std::size_t b, std::size_t e) {
        std::vector<float> row(static_cast<std::size_t>(m.cols));
        for (std::size_t i = b; i < e; ++i) {
          m.row_to_f32(r0 + static_cast<int64_t>(i), row.data());
          uint16_t* o = out.data() + i * static_cast<std::size_t>(ld);
          for (int64_t c = 0; c < m.cols; ++c) o[c] = f32_to_bf16(row[static_cast<std::size_t>(c)]);
          std::fill(o + m.cols, o + ld, uint16_t{0});
        }
      });
      copy(dst, out.data(), static_cast<std::size_t>(rows * ld) * 2);
      dst += static_cast<std::size_t>(rows * ld) * 2;
    }
  }

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

// A MoE layer as cuda::MoeExperts reads it: the router with the shared expert's gate as its row E;
// the experts' gate/up and down stacked, the shared expert last: packed where every expert is
// quantized alike, else in bf16 (dequantized, the shared expert zero-padded to the experts' FFN
// size). Each Weight's `bound` points at its place in the stacks.
// Whether a MoE layer's experts (the shared one included) can stay packed: all quantized alike
// (format, container bits, group size and scale type; FP8 blocks), of one FFN size, and for FP8 each
// matrix a whole number of tile rows from its first row, so that the stacks read as one matrix.
bool experts_packable(const std::vector<MlpWeights*>& experts) {
  const Weight& first = experts[0]->gate;
  if (!first.quantized()) return false;
  for (const MlpWeights* e : experts)
    for (const Weight* w : {&e->gate, &e->up, &e->down}) {
      if (w->format != first.format || w->rows != (w == &e->down ? first.cols : first.rows) || w->cols != (w == &e->down ? first.rows : first.cols))
        return false;
      if (w->format == WeightFormat::MlxAffine &&
          (w->quant.bits != first.quant.bits || w->quant.group_size != first.quant.group_size || w->quant.scale_format != first.quant.scale_format))
        return false;
      if (w->format == WeightFormat::Fp8Block &&
          (w->fp8.block_rows != first.fp8.block_rows || w->fp8.block_cols != first.fp8.block_cols || w->fp8.row_offset % w->fp8.block_rows != 0 ||
           w->rows % w->fp8.block_rows != 0))
        return false;
    }
  return true;
}

void bind_moe(MoeWeights& m, Uploader& up, bool record) {
  using Piece = Uploader::Piece;
  const int64_t H = m.router.cols, I = m.experts[0].gate.rows;
  // The router's rows, the shared gate's, zero rows to cuda::moe_router_rows.
  const int64_t router_rows = cuda::moe_router_rows(m.router.rows, m.has_shared);
  std::vector<Piece> router{{&m.router, m.has_shared ? m.router.rows : router_rows, H}};
  if (m.has_shared) router.push_back({&m.shared_gate, router_rows - m.router.rows, H});
  std::vector<MlpWeights*> experts;
  for (MlpWeights& e : m.experts) experts.push_back(&e);
  if (m.has_shared) experts.push_back(&m.shared);
  const auto r = up.stacked(router);
  // The experts' gate/up and down stacks: packed (moe.h MoeExperts::packed: the bytes the
  // checkpoint has) where every expert is quantized alike, else bf16.
  std::vector<BoundWeight> gu, d;
  if (experts_packable(experts)) {
    std::vector<const Weight*> gate_up, down;
    for (MlpWeights* e : experts) {
      gate_up.push_back(&e->gate);
      gate_up.push_back(&e->up);
      down.push_back(&e->down);
    }
    gu = up.stacked_packed(gate_up);
    d = up.stacked_packed(down);
  } else {
    std::vector<Piece> gate_up, down;
    for (MlpWeights* e : experts) {
      gate_up.push_back({&e->gate, I, H});
      gate_up.push_back({&e->up, I, H});
      down.push_back({&e->down, H, I});
    }
    gu = up.stacked(gate_up);
    d = up.stacked(down);
  }
  if (!record) return;
  m.router.bound = r[0];
  if (m.has_shared) m.shared_gate.bound = r[1];
  for (std::size_t i = 0; i < experts.size(); ++i) {
    experts[i]->gate.bound = gu[2 * i];
    experts[i]->up.bound = gu[2 * i + 1];
    experts[i]->down.bound = d[i];
  }
}

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
  auto layer = [&](LayerWeights& L) {
    vector(L.input_norm);
    vector(L.post_norm);
    if (L.kind == LayerKind::LinearAttention) {
      for (Weight* w : {&L.gdn.in_qkv, &L.gdn.in_z, &L.gdn.in_b, &L.gdn.in_a, &L.gdn.out_proj}) matrix(*w);
      for (ParamVector* v : {&L.gdn.conv, &L.gdn.dt_bias, &L.gdn.neg_exp_a, &L.gdn.norm}) vector(*v);
    } else {
      for (Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj}) matrix(*w);
      for (ParamVector* v : {&L.attn.q_norm, &L.attn.k_norm}) vector(*v);
    }
    if (L.moe.experts.empty()) {
      for (Weight* w : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) matrix(*w);
    } else {
      bind_moe(L.moe, up, record);
    }
  };
  matrix(weights.embed);
  matrix(weights.lm_head);
  vector(weights.final_norm);
  for (auto& L : weights.layers) layer(L);
  if (MtpWeights& m = weights.mtp; m.present) {  // the MTP block (speculative decoding)
    matrix(m.fc);
    for (ParamVector* v : {&m.pre_fc_norm_embedding, &m.pre_fc_norm_hidden, &m.norm}) vector(*v);
    layer(m.layer);
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
         " MiB (bf16, or packed where quantized) plus ~1 GiB of working memory, and the GPU has ",
         free_bytes >> 20, " MiB free of ",
         device_total >> 20, " MiB; use a smaller model, a quantized one, or --device cpu");
  Uploader up(total);
  bind(weights, up, /*record=*/true);
  return up.take();
}

}  // namespace qwenrt
