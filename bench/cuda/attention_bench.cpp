// Gated-attention kernels at Qwen 3.5 27B's shapes (24 query heads, 4 kv heads, head_dim 256):
// decode against the device-to-device copy bandwidth measured in the same run, prefill in TFLOP/s,
// and the prepare step. bench/cuda/attention_bench; CUDA-event timing, median of many runs after
// warm-up; decode runs start from a cold L2 (a 256 MB write between runs) so the KV comes from
// memory even where it would fit in L2.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_prepare.h"
#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"

using namespace qwenrt;
using cuda::DeviceBuffer;

namespace {

constexpr int kNq = 24, kNkv = 4, kDh = 256, kBlockSize = 64;

// Median milliseconds of `runs` timed calls of `fn` after `warmup` untimed ones; `before` runs
// outside the timed region each time.
double median_ms(const std::function<void()>& fn, int warmup, int runs, const std::function<void()>& before = {}) {
  cudaEvent_t start, stop;
  QWENRT_CUDA_CHECK(cudaEventCreate(&start));
  QWENRT_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<float> ms(static_cast<std::size_t>(runs));
  for (auto& m : ms) {
    if (before) before();
    QWENRT_CUDA_CHECK(cudaEventRecord(start));
    fn();
    QWENRT_CUDA_CHECK(cudaEventRecord(stop));
    QWENRT_CUDA_CHECK(cudaEventSynchronize(stop));
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&m, start, stop));
  }
  QWENRT_CUDA_CHECK(cudaEventDestroy(start));
  QWENRT_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Pools for `seqs` sequences of `len` positions each, every sequence's pages scattered over the
// pool by a random permutation (a cache that has lived a while), filled with a finite bf16 value.
struct Cache {
  DeviceBuffer k, v, tables;
  cuda::PagedKv kv;
  Cache(int64_t seqs, int64_t len) {
    const int64_t pages = (len + kBlockSize - 1) / kBlockSize, blocks = seqs * pages;
    const std::size_t bytes = static_cast<std::size_t>(blocks * kBlockSize * kNkv * kDh * 2);
    k = DeviceBuffer(bytes);
    v = DeviceBuffer(bytes);
    QWENRT_CUDA_CHECK(cudaMemset(k.get(), 0x3c, bytes));  // bf16 0x3c3c ≈ 0.0115
    QWENRT_CUDA_CHECK(cudaMemset(v.get(), 0x3c, bytes));
    std::vector<int32_t> ids(static_cast<std::size_t>(blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
    tables = DeviceBuffer(ids.size() * 4);
    tables.upload(ids.data(), ids.size() * 4);
    kv = {k.as<__nv_bfloat16>(), v.as<__nv_bfloat16>(), blocks, kBlockSize, kNkv, kDh, tables.as<int32_t>(), static_cast<int>(pages)};
  }
};

struct Row {
  std::string what;
  double us;
  std::string rate;
};

}  // namespace

int main() {
  const cuda::DeviceInfo info = cuda::require_supported_device(0);
  std::printf("%s, %d SMs, %.0f MB L2\n", info.name.c_str(), info.multiprocessors, info.l2_bytes / 1e6);
  std::vector<Row> table;

  // Device-to-device copy: bytes read plus bytes written.
  double copy_gbps = 0;
  {
    const std::size_t bytes = std::size_t{1} << 30;
    copy_gbps = cuda::copy_bandwidth_GBps(bytes);
    const double ms = 2.0 * static_cast<double>(bytes) / (copy_gbps * 1e9) * 1e3;
    std::printf("device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (read + written)\n", ms, copy_gbps);
    table.push_back({"copy 1 GiB", ms * 1e3, std::to_string(static_cast<int>(copy_gbps)) + " GB/s"});
  }

  DeviceBuffer flush(std::size_t{256} << 20);
  int flushes = 0;
  auto cold_l2 = [&] { QWENRT_CUDA_CHECK(cudaMemsetAsync(flush.get(), flushes++ & 0xff, flush.bytes())); };

  struct DecodeCase {
    int64_t batch, len;
  };
  for (DecodeCase c : {DecodeCase{1, 1024}, {1, 8192}, {1, 32768}, {64, 4096}}) {
    Cache cache(c.batch, c.len);
    DeviceBuffer q(static_cast<std::size_t>(c.batch * kNq * kDh * 2)), qg(static_cast<std::size_t>(c.batch * kNq * 2 * kDh * 4)),
        out(static_cast<std::size_t>(c.batch * kNq * kDh * 2));
    QWENRT_CUDA_CHECK(cudaMemset(q.get(), 0x3c, q.bytes()));
    QWENRT_CUDA_CHECK(cudaMemset(qg.get(), 0, qg.bytes()));
    std::vector<int32_t> pos(static_cast<std::size_t>(c.batch), static_cast<int32_t>(c.len - 1));
    DeviceBuffer positions(pos.size() * 4);
    positions.upload(pos.data(), pos.size() * 4);
    const std::size_t ws_bytes = cuda::attention_decode_workspace_bytes(c.batch, kNq, c.len);
    DeviceBuffer ws(ws_bytes);
    auto run = [&] {
      cuda::attention_decode(q.as<__nv_bfloat16>(), qg.as<float>(), positions.as<int32_t>(), c.batch, kNq, c.len, cache.kv, ws.get(), ws_bytes,
                             out.as<__nv_bfloat16>(), nullptr);
    };
    const double ms = median_ms(run, 5, 50, cold_l2);
    const double kv_bytes = static_cast<double>(c.batch) * c.len * kNkv * kDh * 2 * 2;
    const double gbps = kv_bytes / (ms * 1e-3) / 1e9;
    char what[96], rate[96];
    std::snprintf(what, sizeof what, "decode B=%lld ctx %lld (%lld splits)", static_cast<long long>(c.batch), static_cast<long long>(c.len),
                  static_cast<long long>(cuda::decode_splits(c.len)));
    std::snprintf(rate, sizeof rate, "%.0f GB/s KV, %.2f of copy", gbps, gbps / copy_gbps);
    std::printf("%s: %.1f us, %s\n", what, ms * 1e3, rate);
    table.push_back({what, ms * 1e3, rate});
  }

  // Prefill of one 8k-token window (its keys already cached), and the prepare step for it.
  {
    const int64_t T = 8192;
    Cache cache(1, T);
    DeviceBuffer q(static_cast<std::size_t>(T * kNq * kDh * 2)), qg(static_cast<std::size_t>(T * kNq * 2 * kDh * 4)),
        out(static_cast<std::size_t>(T * kNq * kDh * 2)), k(static_cast<std::size_t>(T * kNkv * kDh * 4)), v(k.bytes());
    QWENRT_CUDA_CHECK(cudaMemset(q.get(), 0x3c, q.bytes()));
    QWENRT_CUDA_CHECK(cudaMemset(qg.get(), 0x3c, qg.bytes()));
    QWENRT_CUDA_CHECK(cudaMemset(k.get(), 0x3c, k.bytes()));
    QWENRT_CUDA_CHECK(cudaMemset(v.get(), 0x3c, v.bytes()));
    std::vector<int32_t> pos(static_cast<std::size_t>(T)), seq(pos.size(), 0), first = {0, static_cast<int32_t>(T)};
    std::iota(pos.begin(), pos.end(), 0);
    DeviceBuffer positions(pos.size() * 4), seqs(pos.size() * 4), first_row(8);
    positions.upload(pos.data(), pos.size() * 4);
    seqs.upload(seq.data(), seq.size() * 4);
    first_row.upload(first.data(), 8);
    std::vector<float> ones(kDh, 1.0f);
    DeviceBuffer norm(kDh * 4);
    norm.upload(ones.data(), kDh * 4);

    const cuda::PrefillWindows w{first_row.as<int32_t>(), positions.as<int32_t>(), 1, T};
    char what[64], rate[64];
    for (auto kernel : {cuda::PrefillKernel::Mma, cuda::PrefillKernel::Wgmma}) {
      if (!cuda::attention_prefill_supports(kernel)) continue;
      const double ms = median_ms(
          [&] { cuda::attention_prefill(q.as<__nv_bfloat16>(), qg.as<float>(), w, kNq, cache.kv, out.as<__nv_bfloat16>(), nullptr, kernel); }, 2, 10);
      const double tflops = 2.0 * T * T * kDh * kNq / (ms * 1e-3) / 1e12;  // 2·2·T²/2·Dh·Nq: causal half of QKᵀ and PV
      std::snprintf(what, sizeof what, "prefill 8k tokens, one sequence, %s", cuda::prefill_kernel_name(kernel));
      std::snprintf(rate, sizeof rate, "%.0f TFLOP/s", tflops);
      std::printf("%s: %.1f us, %s\n", what, ms * 1e3, rate);
      table.push_back({what, ms * 1e3, rate});
    }

    for (int64_t rows : {int64_t{64}, T}) {
      const cuda::QkNormRope nr{norm.as<float>(), norm.as<float>(), 1e-6f, 64, 1e7};
      auto prep = [&] {
        cuda::attention_prepare({positions.as<int32_t>(), seqs.as<int32_t>(), rows}, qg.as<float>(), k.as<float>(), v.as<float>(), kNq, nr, cache.kv,
                                q.as<__nv_bfloat16>(), nullptr);
      };
      const double pms = median_ms(prep, 3, 20, cold_l2);
      const double bytes = static_cast<double>(rows) * ((kNq * 2 * kDh + 2 * kNkv * kDh) * 4 + (kNq + 2 * kNkv) * kDh * 2);
      std::snprintf(what, sizeof what, "prepare %lld rows", static_cast<long long>(rows));
      std::snprintf(rate, sizeof rate, "%.0f GB/s", bytes / (pms * 1e-3) / 1e9);
      std::printf("%s: %.1f us, %s\n", what, pms * 1e3, rate);
      table.push_back({what, pms * 1e3, rate});
    }
  }

  std::printf("\n| %-40s | %10s | %-28s |\n|%s|%s|%s|\n", "27B attention (Nq 24, Nkv 4, Dh 256)", "us", "rate", std::string(42, '-').c_str(),
              std::string(12, '-').c_str(), std::string(30, '-').c_str());
  for (const Row& r : table) std::printf("| %-40s | %10.1f | %-28s |\n", r.what.c_str(), r.us, r.rate.c_str());
  return 0;
}
