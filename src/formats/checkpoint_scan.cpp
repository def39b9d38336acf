#include "formats/checkpoint_scan.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "formats/checkpoint_dir.h"

namespace qwenrt {

namespace {

constexpr std::size_t kChunkValues = std::size_t{1} << 20;

struct Counts {
  int64_t nan = 0, inf = 0, first = -1;
};

// Non-finite by the bits: exponent all ones; Inf when the mantissa is zero, NaN otherwise.
template <typename Bits, Bits kExp, Bits kMant>
void count_range(const std::byte* data, std::size_t begin, std::size_t end, Counts& c) {
  for (std::size_t i = begin; i < end; ++i) {
    Bits b;
    std::memcpy(&b, data + i * sizeof(Bits), sizeof(Bits));
    if ((b & kExp) != kExp) continue;
    if (b & kMant) ++c.nan;
    else ++c.inf;
    if (c.first < 0) c.first = static_cast<int64_t>(i);
  }
}

void count(DType t, const std::byte* data, std::size_t begin, std::size_t end, Counts& c) {
  switch (t) {
    case DType::BF16: return count_range<uint16_t, 0x7F80, 0x007F>(data, begin, end, c);
    case DType::F16: return count_range<uint16_t, 0x7C00, 0x03FF>(data, begin, end, c);
    case DType::F32: return count_range<uint32_t, 0x7F800000u, 0x007FFFFFu>(data, begin, end, c);
    case DType::F64: return count_range<uint64_t, 0x7FF0000000000000ull, 0x000FFFFFFFFFFFFFull>(data, begin, end, c);
    case DType::F8E4M3: return count_range<uint8_t, 0x7F, 0x7F>(data, begin, end, c);  // e4m3fn: S.1111.111 is NaN, no Inf
    case DType::F8E5M2: return count_range<uint8_t, 0x7C, 0x03>(data, begin, end, c);
    default: return;
  }
}

}  // namespace

CheckpointScan scan_non_finite(const CheckpointDir& ckpt, ThreadPool& pool) {
  CheckpointScan scan;
  struct Chunk {
    const TensorInfo* tensor;
    std::size_t begin, end;
  };
  std::vector<const TensorInfo*> tensors;
  std::vector<Chunk> chunks;
  for (const auto& [name, t] : ckpt.tensors()) {
    if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32 && t->dtype != DType::F64 && t->dtype != DType::F8E4M3 &&
        t->dtype != DType::F8E5M2) {
      scan.skipped.push_back(name);
      continue;
    }
    tensors.push_back(t);
    const std::size_t n = static_cast<std::size_t>(t->numel());
    scan.values_scanned += static_cast<int64_t>(n);
    for (std::size_t b = 0; b < n; b += kChunkValues) chunks.push_back({t, b, std::min(n, b + kChunkValues)});
  }
  scan.tensors_scanned = static_cast<int64_t>(tensors.size());
  std::vector<Counts> counts(chunks.size());
  pool.parallel_for(chunks.size(), 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) count(chunks[i].tensor->dtype, chunks[i].tensor->data, chunks[i].begin, chunks[i].end, counts[i]);
  });
  // Chunks of one tensor are adjacent and in order: the first hit of the first chunk with one wins.
  for (std::size_t i = 0; i < chunks.size();) {
    const TensorInfo* t = chunks[i].tensor;
    NonFiniteTensor r{t->name, t->file};
    for (; i < chunks.size() && chunks[i].tensor == t; ++i) {
      r.nan += counts[i].nan;
      r.inf += counts[i].inf;
      if (r.first_index < 0) r.first_index = counts[i].first;
    }
    if (r.nan + r.inf > 0) scan.non_finite.push_back(std::move(r));
  }
  return scan;
}

}  // namespace qwenrt
