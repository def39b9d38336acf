#pragma once
// What the attention kernel tests share: a paged KV cache on the GPU with shuffled block tables and
// its host mirror, random rows, and the reference computed from the math in double. The reference
// uses the same bf16-rounded q, K and V the kernels see, so what remains is f32 accumulation, the
// bf16 softmax weights of the tensor-core product and the bf16 output.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_prepare.h"
#include "backend/cuda/gpu_test_support.h"
#include "model/cpu/attention.h"

namespace qwenrt::test {

constexpr int kDh = cuda::kAttentionHeadDim;

struct AttentionShape {
  int nq = 8, nkv = 2, block_size = 64;
  int rotary_dim = 64;
  double theta = 1e7;
  float eps = 1e-6f;
  int group() const { return nq / nkv; }
};

// Tens of millions of values are drawn, so a splitmix64 stream rather than <random>'s normals:
// uniform with unit variance (times scale), never exactly zero.
class FastRandom {
 public:
  explicit FastRandom(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float scale = 1.0f) {
    const float u = (2.0f * static_cast<float>(next() >> 40) + 1.0f) / 16777216.0f - 1.0f;  // odd/2^24 − 1: never 0
    return u * 1.7320508f * scale;
  }
  void fill(std::vector<float>& v, float scale = 1.0f) {
    for (auto& x : v) x = uniform(scale);
  }

 private:
  uint64_t state_;
};

inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// More than one bf16 step apart (a step is at most |x|/128), with a floor for values near zero
// where the f32 results before rounding differ by cancellation (~1e-7 absolute).
inline bool bf16_far(float got, float ref) { return !(std::abs(got - ref) <= std::max(std::abs(got), std::abs(ref)) / 128 + 1e-5f); }

// One attention layer's pools on the GPU (poisoned: every element nothing wrote is NaN) with one
// block-table row per sequence drawn from a shuffled pool, plus a few blocks no table names; and
// the host mirror of every position written, as the bf16 values the GPU holds.
class PagedCache {
 public:
  PagedCache(const AttentionShape& shape, const std::vector<int>& capacity, uint64_t seed) : shape_(shape), capacity_(capacity) {
    const int seqs = static_cast<int>(capacity.size());
    for (int c : capacity) max_blocks_ = std::max(max_blocks_, (c + shape.block_size - 1) / shape.block_size);
    int needed = 0;
    for (int c : capacity) needed += (c + shape.block_size - 1) / shape.block_size;
    num_blocks_ = needed + 5;
    std::vector<int32_t> ids(static_cast<std::size_t>(num_blocks_));
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::shuffle(ids.begin(), ids.end(), rng);
    table_.assign(static_cast<std::size_t>(seqs * max_blocks_), -1);
    block_owner_.assign(static_cast<std::size_t>(num_blocks_), {-1, -1});
    int next = 0;
    for (int s = 0; s < seqs; ++s)
      for (int i = 0; i < (capacity[s] + shape.block_size - 1) / shape.block_size; ++i) {
        const int32_t id = ids[static_cast<std::size_t>(next++)];
        table_[static_cast<std::size_t>(s * max_blocks_ + i)] = id;
        block_owner_[static_cast<std::size_t>(id)] = {s, i};
      }
    const std::size_t pool = pool_elements();
    k_pool_ = cuda::DeviceBuffer(pool * 2);
    v_pool_ = cuda::DeviceBuffer(pool * 2);
    poison(k_pool_);
    poison(v_pool_);
    d_table_ = to_device(table_);
    for (int c : capacity) {
      const std::size_t n = static_cast<std::size_t>(c) * shape.nkv * kDh;
      k_.emplace_back(n, NAN);
      v_.emplace_back(n, NAN);
      written_.emplace_back(static_cast<std::size_t>(c), 0);
    }
  }

  cuda::PagedKv view() const {
    cuda::PagedKv kv;
    kv.k = k_pool_.as<__nv_bfloat16>();
    kv.v = v_pool_.as<__nv_bfloat16>();
    kv.num_blocks = num_blocks_;
    kv.block_size = shape_.block_size;
    kv.num_kv_heads = shape_.nkv;
    kv.head_dim = kDh;
    kv.block_tables = d_table_.as<int32_t>();
    kv.max_blocks_per_seq = max_blocks_;
    return kv;
  }
  const AttentionShape& shape() const { return shape_; }
  int num_seqs() const { return static_cast<int>(capacity_.size()); }
  int max_capacity() const { return *std::max_element(capacity_.begin(), capacity_.end()); }
  int max_blocks() const { return max_blocks_; }

  // The mirror's K/V head row of (seq, pos, kv head).
  float* key(int s, int pos, int h) { return &k_[s][(static_cast<std::size_t>(pos) * shape_.nkv + h) * kDh]; }
  float* value(int s, int pos, int h) { return &v_[s][(static_cast<std::size_t>(pos) * shape_.nkv + h) * kDh]; }
  const float* key(int s, int pos, int h) const { return &k_[s][(static_cast<std::size_t>(pos) * shape_.nkv + h) * kDh]; }
  const float* value(int s, int pos, int h) const { return &v_[s][(static_cast<std::size_t>(pos) * shape_.nkv + h) * kDh]; }
  void mark_written(int s, int pos) { written_[s][static_cast<std::size_t>(pos)] = 1; }

  // Writes the mirror of positions [0, len) of each sequence straight into the pools (random K/V).
  void fill_direct(const std::vector<int>& lengths, FastRandom& rng) {
    std::vector<uint16_t> kimg(pool_elements(), 0xffff), vimg(pool_elements(), 0xffff);
    for (int s = 0; s < num_seqs(); ++s)
      for (int pos = 0; pos < lengths[s]; ++pos) {
        for (int h = 0; h < shape_.nkv; ++h)
          for (int d = 0; d < kDh; ++d) {
            const std::size_t at = pool_index(s, pos, h) + d;
            kimg[at] = f32_to_bf16(rng.uniform());
            vimg[at] = f32_to_bf16(rng.uniform());
            key(s, pos, h)[d] = bf16_to_f32(kimg[at]);
            value(s, pos, h)[d] = bf16_to_f32(vimg[at]);
          }
        mark_written(s, pos);
      }
    k_pool_.upload(kimg.data(), kimg.size() * 2);
    v_pool_.upload(vimg.data(), vimg.size() * 2);
  }

  // Every pool row some table maps to a written position must equal the mirror; every other
  // element must still hold the poison. Returns the relative L2 error of K and V together and
  // counts elements more than one bf16 step away from the mirror (bf16_far).
  double check_pools(int64_t* far_off, int64_t* stray_writes) const {
    const auto kp = to_host<uint16_t>(k_pool_, pool_elements()), vp = to_host<uint16_t>(v_pool_, pool_elements());
    std::vector<float> got;
    std::vector<double> ref;
    *far_off = 0, *stray_writes = 0;
    for (int64_t b = 0; b < num_blocks_; ++b)
      for (int row = 0; row < shape_.block_size; ++row) {
        const auto [s, page] = block_owner_[static_cast<std::size_t>(b)];
        const int pos = page * shape_.block_size + row;
        const bool live = s >= 0 && pos < capacity_[s] && written_[s][static_cast<std::size_t>(pos)];
        for (int h = 0; h < shape_.nkv; ++h)
          for (int d = 0; d < kDh; ++d) {
            const std::size_t at = ((static_cast<std::size_t>(b) * shape_.block_size + row) * shape_.nkv + h) * kDh + d;
            if (!live) {
              *stray_writes += (kp[at] != 0xffff) + (vp[at] != 0xffff);
              continue;
            }
            for (int kv = 0; kv < 2; ++kv) {
              const uint16_t bits = kv ? vp[at] : kp[at];
              const float want = kv ? value(s, pos, h)[d] : key(s, pos, h)[d];
              got.push_back(bf16_to_f32(bits));
              ref.push_back(want);
              *far_off += bf16_far(bf16_to_f32(bits), want);
            }
          }
      }
    return relative_l2(got, ref);
  }

 private:
  std::size_t pool_elements() const { return static_cast<std::size_t>(num_blocks_) * shape_.block_size * shape_.nkv * kDh; }
  std::size_t pool_index(int s, int pos, int h) const {
    const int64_t block = table_[static_cast<std::size_t>(s * max_blocks_ + pos / shape_.block_size)];
    return ((static_cast<std::size_t>(block) * shape_.block_size + pos % shape_.block_size) * shape_.nkv + h) * kDh;
  }

  AttentionShape shape_;
  std::vector<int> capacity_;
  int max_blocks_ = 0;
  int64_t num_blocks_ = 0;
  std::vector<int32_t> table_;
  std::vector<std::pair<int, int>> block_owner_;  // block → (sequence, page), (-1, -1) if unused
  cuda::DeviceBuffer k_pool_, v_pool_, d_table_;
  std::vector<std::vector<float>> k_, v_;  // [seq][pos][kv head][dim]
  std::vector<std::vector<char>> written_;
};

// Rows of one forward step: sequence s contributes `rows` consecutive positions from `first`.
struct Window {
  int first = 0, rows = 0;
};

// A step's rows in sequence order with their inputs and, on the host, the bf16 query the kernels
// should use; outputs poisoned.
struct Batch {
  int64_t rows = 0;
  std::vector<int32_t> positions, seq, first_row;
  std::vector<float> qg;  // [rows][nq][2][256] projection: query half, gate half
  std::vector<float> q;   // [rows][nq][256] reference query (bf16 values)
  cuda::DeviceBuffer d_qg, d_q, d_positions, d_seq, d_first_row, d_out;
};

inline Batch layout_batch(const std::vector<Window>& windows, int nq) {
  Batch b;
  b.first_row.push_back(0);
  for (int s = 0; s < static_cast<int>(windows.size()); ++s) {
    for (int i = 0; i < windows[s].rows; ++i) {
      b.positions.push_back(windows[s].first + i);
      b.seq.push_back(s);
    }
    b.first_row.push_back(static_cast<int32_t>(b.positions.size()));
  }
  b.rows = static_cast<int64_t>(b.positions.size());
  b.qg.resize(static_cast<std::size_t>(b.rows * nq * 2 * kDh));
  b.q.resize(static_cast<std::size_t>(b.rows * nq * kDh));
  b.d_positions = to_device(b.positions.empty() ? std::vector<int32_t>{0} : b.positions);
  b.d_seq = to_device(b.seq.empty() ? std::vector<int32_t>{0} : b.seq);
  b.d_first_row = to_device(b.first_row);
  b.d_q = cuda::DeviceBuffer(std::max<std::size_t>(b.q.size(), 1) * 2);
  b.d_out = cuda::DeviceBuffer(std::max<std::size_t>(b.q.size(), 1) * 2);
  poison(b.d_q);
  poison(b.d_out);
  return b;
}

struct NormWeights {
  std::vector<float> q, k;
  cuda::DeviceBuffer dq, dk;
  cuda::QkNormRope device(const AttentionShape& shape) const { return {dq.as<float>(), dk.as<float>(), shape.eps, shape.rotary_dim, shape.theta}; }
};

inline NormWeights random_norms(FastRandom& rng) {
  NormWeights w;
  w.q.resize(kDh);
  w.k.resize(kDh);
  for (auto& x : w.q) x = 1.0f + 0.3f * rng.uniform();  // (1 + w), as the checkpoint loader leaves it
  for (auto& x : w.k) x = 1.0f + 0.3f * rng.uniform();
  w.dq = to_device(w.q);
  w.dk = to_device(w.k);
  return w;
}

// Random projections for `windows`, through attention_prepare on the GPU and the CPU's rms_norm
// and rope_rotate_half on the host (rounded to bf16, K and V recorded in the mirror).
inline Batch prepare_batch(PagedCache& cache, const NormWeights& w, const std::vector<Window>& windows, FastRandom& rng) {
  const AttentionShape& sh = cache.shape();
  Batch b = layout_batch(windows, sh.nq);
  std::vector<float> k(static_cast<std::size_t>(b.rows * sh.nkv * kDh)), v(k.size());
  rng.fill(b.qg);
  rng.fill(k);
  rng.fill(v);
  b.d_qg = to_device(b.qg);
  auto dk = to_device(k), dv = to_device(v);
  cuda::attention_prepare({b.d_positions.as<int32_t>(), b.d_seq.as<int32_t>(), b.rows}, b.d_qg.as<float>(), dk.as<float>(), dv.as<float>(), sh.nq,
                          w.device(sh), cache.view(), b.d_q.as<__nv_bfloat16>(), nullptr);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> cs(static_cast<std::size_t>(sh.rotary_dim / 2)), sn(cs.size()), head(kDh);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int s = b.seq[r], pos = b.positions[r];
    rope_angles(pos, sh.rotary_dim, sh.theta, cs.data(), sn.data());
    auto norm_rope = [&](const float* x, const float* weight, float* out) {
      cpu::rms_norm(x, weight, head.data(), kDh, sh.eps);
      cpu::rope_rotate_half(head.data(), cs.data(), sn.data(), sh.rotary_dim);
      for (int d = 0; d < kDh; ++d) out[d] = round_bf16(head[d]);
    };
    for (int h = 0; h < sh.nq; ++h) norm_rope(&b.qg[(r * sh.nq + h) * 2 * kDh], w.q.data(), &b.q[(r * sh.nq + h) * kDh]);
    for (int h = 0; h < sh.nkv; ++h) {
      norm_rope(&k[(r * sh.nkv + h) * kDh], w.k.data(), cache.key(s, pos, h));
      for (int d = 0; d < kDh; ++d) cache.value(s, pos, h)[d] = round_bf16(v[(r * sh.nkv + h) * kDh + d]);
    }
    cache.mark_written(s, pos);
  }
  return b;
}

// Row r of the batch attends to its sequence's positions [0, positions[r]]: [rows][nq][256].
inline std::vector<double> reference_attention(const PagedCache& cache, const Batch& b) {
  const AttentionShape& sh = cache.shape();
  std::vector<double> out(static_cast<std::size_t>(b.rows * sh.nq * kDh));
  std::vector<double> p, acc(kDh);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int s = b.seq[r], pos = b.positions[r];
    p.resize(static_cast<std::size_t>(pos + 1));
    for (int h = 0; h < sh.nq; ++h) {
      const int hk = h / sh.group();
      const float* q = &b.q[(r * sh.nq + h) * kDh];
      double mx = -INFINITY;
      for (int j = 0; j <= pos; ++j) {
        const float* kj = cache.key(s, j, hk);
        double dot = 0;
        for (int d = 0; d < kDh; ++d) dot += static_cast<double>(q[d]) * kj[d];
        p[j] = dot / std::sqrt(static_cast<double>(kDh));
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int j = 0; j <= pos; ++j) sum += p[j] = std::exp(p[j] - mx);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j <= pos; ++j) {
        const float* vj = cache.value(s, j, hk);
        for (int d = 0; d < kDh; ++d) acc[d] += p[j] * vj[d];
      }
      const float* gate = &b.qg[(r * sh.nq + h) * 2 * kDh + kDh];
      for (int d = 0; d < kDh; ++d) out[(r * sh.nq + h) * kDh + d] = acc[d] / sum / (1.0 + std::exp(-static_cast<double>(gate[d])));
    }
  }
  return out;
}

inline std::vector<float> download_bf16(const cuda::DeviceBuffer& buf, std::size_t n) {
  const auto bits = to_host<uint16_t>(buf, n);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

}  // namespace qwenrt::test
