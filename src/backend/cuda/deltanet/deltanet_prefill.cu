// A window of rows through a Gated DeltaNet layer: the chunk metadata, the workspace layout and the
// four launches of the chunked kernels (deltanet_prefill.h, deltanet_chunks.cuh).
#include <algorithm>
#include <set>

#include "backend/cuda/deltanet/deltanet_chunk_output.h"
#include "backend/cuda/deltanet/deltanet_chunk_prepare.h"
#include "backend/cuda/deltanet/deltanet_chunk_state.h"
#include "backend/cuda/deltanet/deltanet_chunks.cuh"
#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

using namespace deltanet_chunks;

struct WorkLayout {
  std::size_t spans = 0, chunks = 0, qn = 0, kn = 0, qlo = 0, klo = 0, klo_frag = 0, w = 0, u = 0, gcum = 0, h = 0, ready = 0, total = 0;
  int n_chunks = 0;
};

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

WorkLayout plan(const std::vector<DeltaNetSpan>& spans, int nk, int nv) {
  WorkLayout L;
  for (const auto& s : spans) L.n_chunks += (std::max(s.rows, 0) + kC - 1) / kC;
  // A chunk's [64][128] tile: bf16 for what feeds a product, f32 for U; the state snapshot bf16.
  const std::size_t C = static_cast<std::size_t>(L.n_chunks), tile16 = kC * kD * sizeof(__nv_bfloat16), tile32 = kC * kD * sizeof(float);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  L.spans = take(spans.size() * sizeof(SpanMeta));
  L.chunks = take(C * sizeof(ChunkMeta));
  L.qn = take(C * nk * tile16);
  L.kn = take(C * nk * tile16);
  L.qlo = take(C * nk * tile16);
  L.klo = take(C * nk * tile16);
  L.klo_frag = take(C * nk * tile16);
  L.w = take(C * nv * tile16);
  L.u = take(C * nv * tile32);
  L.gcum = take(C * nv * kC * sizeof(float));
  L.h = take(C * nv * kD * kD * sizeof(__nv_bfloat16));
  L.ready = take(C * nv * sizeof(int32_t));
  L.total = at;
  return L;
}

}  // namespace

std::size_t deltanet_prefill_shared_bytes(int nv) {
  return std::max({deltanet_chunks::prepare_shared_bytes(), deltanet_chunks::state_shared_bytes(nv), deltanet_chunks::output_shared_bytes()});
}

std::size_t deltanet_prefill_workspace_bytes(const std::vector<DeltaNetSpan>& spans, int nk, int nv) { return plan(spans, nk, nv).total; }

DeltaNetWindow plan_deltanet_window(const std::vector<DeltaNetSpan>& spans, int nk, int nv, void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream) {
  if (spans.empty() || spans.size() > 65535) fail("deltanet_prefill: ", spans.size(), " spans; it takes 1 to 65535");
  std::set<int32_t> slots;
  for (const auto& s : spans) {
    if (s.rows < 1 || s.first_row < 0 || s.start_position < 0 || s.slot < 0 || int64_t{s.start_position} + s.rows > INT32_MAX)
      fail("deltanet_prefill: bad span (first row ", s.first_row, ", ", s.rows, " rows, start position ", s.start_position, ", slot ", s.slot, ")");
    if (!slots.insert(s.slot).second) fail("deltanet_prefill: two spans share cache slot ", s.slot);
  }
  if (nk < 1 || nv < 1) fail("deltanet_prefill: ", nk, " key heads and ", nv, " value heads");
  const WorkLayout L = plan(spans, nk, nv);
  if (L.n_chunks > 65535) fail("deltanet_prefill: ", L.n_chunks, " chunks of ", kC, " rows in one window; it takes at most 65535");
  if (!workspace || workspace_bytes < L.total) fail("deltanet_prefill: workspace of ", workspace_bytes, " bytes; the window needs ", L.total);
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) fail("deltanet_prefill: the workspace must be 256-byte aligned");

  std::vector<SpanMeta> span_meta;
  std::vector<ChunkMeta> chunk_meta;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const DeltaNetSpan& s = spans[i];
    const int first_chunk = static_cast<int>(chunk_meta.size());
    for (int r = 0; r < s.rows; r += kC) chunk_meta.push_back({s.first_row + r, std::min(kC, s.rows - r), static_cast<int32_t>(i), 0});
    span_meta.push_back({s.first_row, s.rows, s.start_position, s.slot, first_chunk, static_cast<int32_t>(chunk_meta.size()) - first_chunk, 0, 0});
  }
  auto* base = static_cast<std::byte*>(workspace);
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(base + L.spans, span_meta.data(), span_meta.size() * sizeof(SpanMeta), cudaMemcpyHostToDevice, stream));
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(base + L.chunks, chunk_meta.data(), chunk_meta.size() * sizeof(ChunkMeta), cudaMemcpyHostToDevice, stream));
  return {spans, workspace, nk, nv, L.n_chunks};
}

void deltanet_prefill(const DeltaNetDecodeArgs& a, const DeltaNetWindow& window, cudaStream_t stream) {
  if (a.dk != kD || a.dv != kD)
    fail("deltanet_prefill: head dims dk ", a.dk, ", dv ", a.dv, " are not supported; the kernels are built for dk = dv = ", kD);
  if (a.nk < 1 || a.nv < 1 || a.nv % a.nk != 0 || a.nv > 65535)
    fail("deltanet_prefill: ", a.nv, " value heads over ", a.nk, " key heads; needs nk >= 1 and nv a multiple of nk");
  if (a.nk != window.nk || a.nv != window.nv)
    fail("deltanet_prefill: the window was planned for ", window.nk, "/", window.nv, " heads, the layer has ", a.nk, "/", a.nv);
  if (a.K != K) fail("deltanet_prefill: conv kernel size ", a.K, " is not supported; the kernels are built for K = ", K);
  if (!a.qkv || !a.z || !a.b || !a.a || !a.conv_w || !a.neg_exp_a || !a.dt_bias || !a.norm_w || !a.conv_state || !a.rec_state || !a.out ||
      !window.workspace)
    fail("deltanet_prefill: a null pointer among the arguments");
  const int64_t key_dim = int64_t{a.nk} * kD, value_dim = int64_t{a.nv} * kD, conv_dim = 2 * key_dim + value_dim;
  if (a.ld_qkv < conv_dim || a.ld_z < value_dim || a.ld_ba < a.nv || a.ld_out < value_dim)
    fail("deltanet_prefill: row strides qkv ", a.ld_qkv, ", z ", a.ld_z, ", b/a ", a.ld_ba, ", out ", a.ld_out, " must be at least conv_dim ",
         conv_dim, ", value_dim ", value_dim, ", nv ", a.nv, ", value_dim ", value_dim);
  if (a.conv_slot_stride < K * conv_dim)
    fail("deltanet_prefill: conv slot stride ", a.conv_slot_stride, " is less than K x conv_dim = ", K * conv_dim);
  // The conv moves 4 channels at a time.
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.qkv) || !aligned16(a.conv_state) || !aligned16(a.conv_w) || a.ld_qkv % 4 != 0 || a.conv_slot_stride % 4 != 0)
    fail("deltanet_prefill: qkv, the conv rings and the conv weights need 16-byte alignment, the qkv row stride (", a.ld_qkv,
         ") and the conv slot stride (", a.conv_slot_stride, ") multiples of 4");
  if (a.rec_slot_stride < value_dim * kD || a.rec_slot_stride % 4 != 0 || reinterpret_cast<uintptr_t>(a.rec_state) % 16 != 0)
    fail("deltanet_prefill: recurrent state needs 16-byte alignment and a slot stride that is a multiple of 4 and at least nv x dk x dv = ",
         value_dim * kD, " (got ", a.rec_slot_stride, ")");
  if (!(a.eps >= 0)) fail("deltanet_prefill: eps ", a.eps, " must be >= 0");

  const WorkLayout L = plan(window.spans, a.nk, a.nv);
  auto* base = static_cast<std::byte*>(window.workspace);
  Work w;
  w.spans = reinterpret_cast<const SpanMeta*>(base + L.spans);
  w.chunks = reinterpret_cast<const ChunkMeta*>(base + L.chunks);
  w.qn = reinterpret_cast<__nv_bfloat16*>(base + L.qn);
  w.kn = reinterpret_cast<__nv_bfloat16*>(base + L.kn);
  w.qlo = reinterpret_cast<__nv_bfloat16*>(base + L.qlo);
  w.klo = reinterpret_cast<__nv_bfloat16*>(base + L.klo);
  w.klo_frag = reinterpret_cast<uint32_t*>(base + L.klo_frag);
  w.w = reinterpret_cast<__nv_bfloat16*>(base + L.w);
  w.u = reinterpret_cast<float*>(base + L.u);
  w.gcum = reinterpret_cast<float*>(base + L.gcum);
  w.h = reinterpret_cast<__nv_bfloat16*>(base + L.h);
  w.ready = reinterpret_cast<int32_t*>(base + L.ready);
  w.slices = kD / state_slice_columns(a.nv);
  const int C = L.n_chunks, S = static_cast<int>(window.spans.size());

  launch_prepare(a, w, C, stream);
  launch_ring(a, w, S, stream);
  launch_state(a, w, S, stream);
  launch_output(a, w, C, stream);
}

}  // namespace qwenrt::cuda