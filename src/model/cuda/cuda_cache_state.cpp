#include "model/cuda/cuda_cache_state.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "model/cuda/memory_epoch.h"

namespace qwenrt {

CudaCacheState& CudaCacheState::of(ModelCache& cache, const ModelConfig& c, cudaStream_t stream) {
  if (auto* s = dynamic_cast<CudaCacheState*>(cache.device_state())) return *s;
  if (cache.device_state()) fail("internal: the cache belongs to another device executor");
  auto s = std::make_unique<CudaCacheState>();
  static uint64_t serials = 0;
  s->serial = ++serials;
  s->stream = stream;
  const int64_t n_gdn = cache.deltanet_layers(), n_attn = cache.attention_layers();
  // The ring keeps K rows; recurrent states start on a 16-byte boundary (moved in float4s).
  s->conv_floats = (c.linear_conv_kernel * c.conv_dim() + 3) / 4 * 4;
  s->gdn_layer_floats = s->conv_floats + c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
  s->slot_floats = n_gdn * s->gdn_layer_floats;
  s->gdn = cuda::DeviceBuffer(static_cast<std::size_t>(std::max<int64_t>(1, s->slot_floats * cache.max_sequences())) * sizeof(float));
  s->block_floats = cache.block_size() * c.num_kv_heads * c.head_dim;
  s->k_pool.resize(static_cast<std::size_t>(n_attn));
  s->v_pool.resize(static_cast<std::size_t>(n_attn));
  CudaCacheState& ref = *s;
  cache.set_device_state(std::move(s));
  return ref;
}

void CudaCacheState::reserve_blocks(int64_t needed, cudaStream_t stream) {
  if (needed <= pool_blocks) return;
  const int64_t grown = std::max<int64_t>(needed, pool_blocks * 2);
  for (auto* pools : {&k_pool, &v_pool})
    for (auto& p : *pools) {
      cuda::DeviceBuffer bigger(static_cast<std::size_t>(grown * block_floats) * sizeof(__nv_bfloat16));
      if (pool_blocks > 0)
        QWENRT_CUDA_CHECK(cudaMemcpyAsync(bigger.get(), p.get(), static_cast<std::size_t>(pool_blocks * block_floats) * sizeof(__nv_bfloat16),
                                          cudaMemcpyDeviceToDevice, stream));
      QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream));
      p = std::move(bigger);
    }
  pool_blocks = grown;
  bump_memory_epoch();
}

void CudaCacheState::copy_block(int from, int to) {
  reserve_blocks(std::max(from, to) + 1, stream);
  const std::size_t bytes = static_cast<std::size_t>(block_floats) * sizeof(__nv_bfloat16);
  for (auto* pools : {&k_pool, &v_pool})
    for (auto& p : *pools)
      QWENRT_CUDA_CHECK(cudaMemcpyAsync(p.as<__nv_bfloat16>() + to * block_floats, p.as<__nv_bfloat16>() + from * block_floats, bytes,
                                        cudaMemcpyDeviceToDevice, stream));
}

struct CudaCacheState::PinnedPool {
  std::mutex mutex;
  std::vector<float*> free;
  ~PinnedPool() {
    cudaDeviceSynchronize();  // (a restore may still be reading one; errors at exit are moot)
    for (float* p : free) cudaFreeHost(p);
  }
};

StateSnapshot CudaCacheState::new_snapshot() {
  if (!pinned_) pinned_ = std::make_shared<PinnedPool>();
  float* p = nullptr;
  {
    std::lock_guard lock(pinned_->mutex);
    if (!pinned_->free.empty()) {
      p = pinned_->free.back();
      pinned_->free.pop_back();
    }
  }
  if (!p && cudaHostAlloc(reinterpret_cast<void**>(&p), static_cast<std::size_t>(std::max<int64_t>(1, slot_floats)) * sizeof(float),
                          cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // no pinned memory left: pageable memory, slower copies
    return plain_snapshot(slot_floats);
  }
  return StateSnapshot(p, [pool = pinned_](float* q) {
    std::lock_guard lock(pool->mutex);
    pool->free.push_back(q);
  });
}

void CudaCacheState::save_state(int slot, float* dst) {
  if (slot_floats == 0) return;
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(dst, gdn.as<float>() + slot * slot_floats, static_cast<std::size_t>(slot_floats) * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaCacheState::load_state(int slot, const float* src) {
  if (slot_floats == 0) return;
  // From pageable memory the copy has taken src's bytes when the call returns; from the pinned pool
  // it runs later on the stream, before any save_state that could reuse the buffer.
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(gdn.as<float>() + slot * slot_floats, src, static_cast<std::size_t>(slot_floats) * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
}

void CudaCacheState::copy_state(int from, int to) {
  if (slot_floats == 0) return;
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(gdn.as<float>() + to * slot_floats, gdn.as<float>() + from * slot_floats,
                                    static_cast<std::size_t>(slot_floats) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}


float* CudaCacheState::kept_states(int slot, int rows) {
  Kept& k = kept_[slot];
  if (k.rows < rows) {
    k.states = cuda::DeviceBuffer(static_cast<std::size_t>(rows * slot_floats) * sizeof(float));
    QWENRT_CUDA_CHECK(cudaMemsetAsync(k.states.get(), 0, static_cast<std::size_t>(rows * slot_floats) * sizeof(float), stream));
    k.rows = rows;
  }
  k.filled = rows;
  return k.states.as<float>();
}

void CudaCacheState::restore_row_state(int slot, int row) {
  if (slot_floats == 0) return;
  const auto it = kept_.find(slot);
  if (it == kept_.end() || row < 0 || row >= it->second.filled) fail("internal: slot ", slot, " kept no DeltaNet state for its row ", row);
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(gdn.as<float>() + slot * slot_floats, it->second.states.as<float>() + row * slot_floats,
                                    static_cast<std::size_t>(slot_floats) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace qwenrt
