// cache/ModelCache pools (bounded KV blocks, reference counts, copy on write) and
// cache/PrefixCache (longest prefix with a snapshot, LRU, the byte cap, eviction for blocks),
// on a small shape with host storage and no model.
#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

namespace qwenrt {
namespace {

CacheShape small_shape() {
  CacheShape s;
  s.attention_layers = 1;
  s.deltanet_layers = 1;
  s.kv_row = 2;
  s.conv_floats = 3;
  s.recurrent_floats = 4;
  return s;
}

// Writes `n` tokens' K rows and a state into `slot`, values from `seed`.
void fill(ModelCache& c, int slot, int64_t n, float seed) {
  const int64_t start = c.length(slot);
  c.extend(slot, start + n);
  for (int64_t p = start; p < start + n; ++p) c.key(0, slot, p)[0] = seed + static_cast<float>(p);
  c.recurrent_state(0, slot)[0] = seed;
}

TEST(ModelCache, BoundedPoolRefusesPastItsBlocks) {
  ModelCache c(small_shape(), 2, 4, true, 3);
  const int a = c.acquire();
  c.extend(a, 12);  // 3 blocks
  EXPECT_EQ(c.free_blocks(), 0);
  EXPECT_EQ(c.blocks_needed(a, 13), 1);
  EXPECT_THROW(c.extend(a, 13), Error);
  c.release(a);
  EXPECT_EQ(c.free_blocks(), 3);
  EXPECT_EQ(c.blocks_in_use(), 0);
}

TEST(ModelCache, SharedPartialBlockIsCopiedBeforeWrites) {
  ModelCache c(small_shape(), 2, 4, true, 8);
  const int a = c.acquire();
  fill(c, a, 6, 100);  // blocks: one full, one holding 2 tokens
  const int b = c.acquire();
  c.fork(a, b);
  EXPECT_EQ(c.length(b), 6);
  EXPECT_EQ(c.block_table(b), c.block_table(a));
  EXPECT_EQ(c.recurrent_state(0, b)[0], 100);
  EXPECT_EQ(c.blocks_needed(b, 7), 1);  // the shared partial block
  fill(c, b, 1, 200);
  EXPECT_EQ(c.block_table(b)[0], c.block_table(a)[0]);  // the full block stays shared
  EXPECT_NE(c.block_table(b)[1], c.block_table(a)[1]);
  EXPECT_EQ(c.key(0, b, 5)[0], 105);  // copied
  EXPECT_EQ(c.key(0, b, 6)[0], 206);
  EXPECT_EQ(c.key(0, a, 5)[0], 105);  // a's block untouched
  c.release(a);
  c.release(b);
  EXPECT_EQ(c.blocks_in_use(), 0);
}

TEST(PrefixCache, ResumesFromTheLongestSnapshotAndEvictsLeastRecent) {
  ModelCache c(small_shape(), 2, 4, true, 16);
  PrefixCache pc(c, 1 << 20);
  std::vector<int32_t> prompt(12);
  std::iota(prompt.begin(), prompt.end(), 1);
  const int a = c.acquire();
  fill(c, a, 4, 10);
  pc.insert(std::span<const int32_t>(prompt).first(4), a);
  fill(c, a, 4, 20);
  pc.insert(std::span<const int32_t>(prompt).first(8), a);
  c.release(a);
  EXPECT_EQ(c.blocks_in_use(), 2);  // held by the cache
  EXPECT_EQ(pc.match(prompt, 11), 8);
  EXPECT_EQ(pc.match(prompt, 7), 4);
  std::vector<int32_t> other = prompt;
  other[5] = 99;
  EXPECT_EQ(pc.match(other, 11), 4);
  other[0] = 99;
  EXPECT_EQ(pc.match(other, 11), 0);

  const int b = c.acquire();
  pc.restore(prompt, 8, b);
  EXPECT_EQ(c.length(b), 8);
  EXPECT_EQ(c.recurrent_state(0, b)[0], 20);
  EXPECT_EQ(c.key(0, b, 3)[0], 13);
  EXPECT_EQ(c.key(0, b, 7)[0], 27);
  // Both blocks are shared with b: evicting everything frees none.
  EXPECT_EQ(pc.evictable_blocks(), 0);
  pc.clear();
  EXPECT_EQ(c.blocks_in_use(), 2);
  c.release(b);
  EXPECT_EQ(c.blocks_in_use(), 0);
}

TEST(PrefixCache, StaysWithinItsBytes) {
  ModelCache c(small_shape(), 1, 4, true, 64);
  const std::size_t state = static_cast<std::size_t>(c.state_floats()) * 4;
  // Room for two one-block entries of 4 tokens.
  const std::size_t cap = 2 * (c.kv_bytes_per_block() + state + 16);
  PrefixCache pc(c, cap);
  for (int i = 0; i < 3; ++i) {
    const int s = c.acquire();
    fill(c, s, 4, static_cast<float>(i));
    const std::vector<int32_t> tokens(4, i + 1);
    pc.insert(tokens, s);
    c.release(s);
    EXPECT_LE(pc.stats().bytes, cap);
  }
  const PrefixCacheStats st = pc.stats();
  EXPECT_EQ(st.entries, 2);
  EXPECT_EQ(st.evictions, 1);
  EXPECT_EQ(st.kv_bytes, 2 * c.kv_bytes_per_block());
  EXPECT_EQ(pc.match(std::vector<int32_t>(5, 1), 4), 0);  // the oldest went
  EXPECT_EQ(pc.match(std::vector<int32_t>(5, 3), 4), 4);
  EXPECT_TRUE(pc.evict_for_blocks(64));
  EXPECT_EQ(pc.stats().entries, 0);
  EXPECT_EQ(c.blocks_in_use(), 0);
}

}  // namespace
}  // namespace qwenrt
