#include "model/cuda/step_io.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "model/cuda/memory_epoch.h"

namespace qwenrt {
namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

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

std::vector<int> committed_launch_rows(const RowLayout& lay) {
  std::vector<int> counts;
  for (const auto& sp : lay.spans) {
    if (static_cast<int64_t>(counts.size()) < sp.rows) counts.resize(static_cast<std::size_t>(sp.rows), 0);
    for (int64_t j = 0; j < sp.rows; ++j) ++counts[static_cast<std::size_t>(j)];
  }
  return counts;
}

StepRows pack_step(const Step& step, const RowLayout& lay, const ModelCache& cache, bool graphs, bool argmax, StepShape& shape,
                   const std::vector<unsigned long long>& keep, std::array<StepIo, 2>& entries, StepIo& io, ScratchArena& scratch,
                   cudaStream_t stream) {
  const int64_t T = lay.total_rows;
  shape.block_size = cache.block_size();
  shape.max_blocks_per_seq = 1;
  shape.max_len = 1;
  for (const auto& sp : lay.spans) {
    shape.max_blocks_per_seq = std::max(shape.max_blocks_per_seq, static_cast<int>(cache.block_table(sp.slot).size()));
    shape.max_len = std::max(shape.max_len, sp.start_position + sp.rows);
  }
  // Decode steps of up to kDecodeRows rows replay a captured graph. Everything a graph bakes in must
  // then repeat from step to step: the length bound and table stride go up in powers of two.
  // Committed steps (speculation's verify windows) too, keyed by their pattern. (A decode step's
  // wanted rows are its rows whether or not it asks for all logits and the hidden rows, so those
  // replay the same graph.)
  shape.pattern = keep.empty() ? 0 : 1;
  if (lay.phase == Phase::Committed) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the rows per sequence and the flags
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (const auto& sp : lay.spans) mix(static_cast<uint64_t>(sp.rows));
    mix(step.all_logits ? 2 : 3);
    mix(keep.empty() ? 4 : 5);
    shape.pattern = h | 2;
  }
  shape.graphable = graphs && (lay.phase == Phase::Decode || lay.phase == Phase::Committed) && !step.hidden_all && !lay.given_embeddings &&
                    T <= kDecodeRows;
  if (shape.graphable) {
    shape.max_len = std::max<int64_t>(64, next_pow2(shape.max_len));
    shape.max_blocks_per_seq = std::max(shape.max_blocks_per_seq, static_cast<int>((shape.max_len + shape.block_size - 1) / shape.block_size));
  }
  if (shape.max_len > (int64_t{1} << 31) - 1) fail("sequence too long for the CUDA attention kernels");

  // Tokens, per-row position / slot / sequence, block tables (one row per span; per row in a
  // committed step, whose attention runs the decode kernel, a row for each query), wanted rows.
  const bool committed = lay.phase == Phase::Committed;
  std::vector<int32_t> tokens, from, pos32, row_slot, row_seq, span_first;
  std::vector<int64_t> pos64;
  const std::size_t stride = static_cast<std::size_t>(shape.max_blocks_per_seq);
  std::vector<int32_t> tables((committed ? static_cast<std::size_t>(T) : lay.spans.size()) * stride, 0);
  for (std::size_t i = 0; i < lay.spans.size(); ++i) {
    const auto& sp = lay.spans[i];
    const auto& tab = cache.block_table(sp.slot);
    span_first.push_back(static_cast<int32_t>(sp.first_row));
    if (!committed) std::copy(tab.begin(), tab.end(), tables.begin() + static_cast<long>(i * stride));
    for (int64_t r = 0; r < sp.rows; ++r) {
      tokens.push_back(step.sequences[i].tokens[static_cast<std::size_t>(r)]);
      from.push_back(step.sequences[i].from_previous);
      pos32.push_back(static_cast<int32_t>(sp.start_position + r));
      pos64.push_back(sp.start_position + r);
      row_slot.push_back(sp.slot);
      if (committed) std::copy(tab.begin(), tab.end(), tables.begin() + static_cast<long>(static_cast<std::size_t>(sp.first_row + r) * stride));
      row_seq.push_back(static_cast<int32_t>(committed ? sp.first_row + r : static_cast<int64_t>(i)));
    }
  }
  span_first.push_back(static_cast<int32_t>(T));
  std::vector<int32_t> committed_rows;
  if (committed) {
    const std::vector<int> counts = committed_launch_rows(lay);
    for (std::size_t j = 0; j < counts.size(); ++j)
      for (const auto& sp : lay.spans)
        if (sp.rows > static_cast<int64_t>(j)) committed_rows.push_back(static_cast<int32_t>(sp.first_row + static_cast<int64_t>(j)));
  }
  if (!keep.empty() && keep.size() != static_cast<std::size_t>(T)) fail("internal: kept states for ", keep.size(), " of ", T, " rows");
  std::vector<int32_t> logit_rows(lay.logit_rows.begin(), lay.logit_rows.end());
  const std::vector<unsigned long long> health{cuda::kStepHealthy};  // copied in each step: the reset
  const int64_t R = static_cast<int64_t>(logit_rows.size());

  // The offsets follow from the row count, the span count and the table stride, which a graph's key
  // fixes, so a graph's baked addresses stay right as long as no region moves.
  MetadataPacker packer;
  const std::size_t at_tokens = packer.add(tokens), at_from = packer.add(from), at_pos32 = packer.add(pos32), at_pos64 = packer.add(pos64),
                    at_slot = packer.add(row_slot), at_seq = packer.add(row_seq), at_first = packer.add(span_first), at_tables = packer.add(tables),
                    at_logit_rows = packer.add(logit_rows), at_health = packer.add(health), at_committed = packer.add(committed_rows),
                    at_keep = packer.add(keep);
  auto grow = [](cuda::PinnedBuffer& buf, std::size_t bytes) {
    const void* before = buf.get<std::byte>(0);
    if (buf.get<std::byte>(bytes) != before) bump_memory_epoch();
  };
  for (StepIo& e : entries) {
    grow(e.meta_host, packer.bytes());
    grow(e.picks_host, health_offset(R) + static_cast<std::size_t>(R) * sizeof(unsigned long long));
  }
  packer.pack(io.meta_host.get<std::byte>(packer.bytes()));
  std::byte* meta = scratch.meta.get<std::byte>(packer.bytes());
  auto at = [&](std::size_t off) { return reinterpret_cast<const int32_t*>(meta + off); };
  StepRows rows{};
  rows.tokens = at(at_tokens);
  rows.from = at(at_from);
  rows.pos32 = at(at_pos32);
  rows.row_slot = at(at_slot);
  rows.row_seq = at(at_seq);
  rows.span_first = at(at_first);
  rows.logit_rows = at(at_logit_rows);
  rows.block_tables = at(at_tables);
  rows.pos64 = reinterpret_cast<const int64_t*>(meta + at_pos64);
  rows.committed_rows = committed ? at(at_committed) : nullptr;
  rows.keep = keep.empty() ? nullptr : reinterpret_cast<const unsigned long long*>(meta + at_keep);
  rows.picks = scratch.picks_for(R, stream);
  rows.meta_src = io.meta_host.device_view<std::byte>();
  rows.meta_dst = meta;
  rows.meta_bytes = packer.bytes();
  rows.picks_mirror = argmax ? io.picks_host.device_view<int32_t>() : nullptr;
  rows.health = reinterpret_cast<unsigned long long*>(meta + at_health);
  rows.health_mirror = argmax ? reinterpret_cast<unsigned long long*>(io.picks_host.device_view<std::byte>() + health_offset(R)) : nullptr;
  return rows;
}

}  // namespace qwenrt
