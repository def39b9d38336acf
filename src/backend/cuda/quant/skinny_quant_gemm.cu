// Decode-shaped products over quantized weights (skinny_quant_gemm.h): the checks, then each run of
// neighbouring weights that one kernel variant takes in one launch (a checkpoint's q/k/v or gate/up
// share their format, so this is one launch).
#include <algorithm>
#include <vector>

#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "core/error.h"

namespace qwenrt::cuda {

void skinny_quant_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  if (n < 1 || n > kSkinnyQuantMaxRows) fail("skinny_quant_gemm: ", n, " activation rows; it takes 1 to ", kSkinnyQuantMaxRows);
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail("skinny_quant_gemm: k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) fail("skinny_quant_gemm: activations are not 16-byte aligned");
  if (segments.empty() || segments.size() > kSkinnyQuantMaxSegments)
    fail("skinny_quant_gemm: ", segments.size(), " weights; it takes 1 to ", kSkinnyQuantMaxSegments);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const QuantSegment& s = segments[i];
    check_quant_matrix(s.w, "skinny_quant_gemm");
    if (s.w.cols != k) fail("skinny_quant_gemm: weight ", i, " has ", s.w.cols, " columns for k ", k);
    if (!s.y || s.ldy < s.w.rows) fail("skinny_quant_gemm: weight ", i, " needs an output with ldy >= ", s.w.rows);
  }
  // The kernel a weight goes to, and the variant of it: affine rows; tiled affine of a container, group
  // size and scale type; FP8 of a piece size.
  struct Kernel {
    enum { AffineRows, AffineTiles, Fp8 } kind;
    int variant;
    bool operator==(const Kernel&) const = default;
  };
  auto kernel_of = [](const QuantMatrix& m) -> Kernel {
    if (m.kind == QuantKind::Fp8) return {Kernel::Fp8, skinny_fp8_piece_bytes(m)};
    if (m.tiled) return {Kernel::AffineTiles, (m.group_size * 4 + static_cast<int>(m.scale_type)) * 2 + (m.kind == QuantKind::Affine8)};
    return {Kernel::AffineRows, 0};
  };
  for (std::size_t i = 0; i < segments.size();) {
    const Kernel which = kernel_of(segments[i].w);
    std::size_t end = i + 1;
    while (end < segments.size() && kernel_of(segments[end].w) == which) ++end;
    // Launches of as many rows as the kernel takes; each row's sums are the same in any of them.
    const int64_t per_launch = which.kind == Kernel::AffineRows ? kSkinnyQuantRowsKernelRows : kSkinnyQuantLaunchRows;
    std::vector<QuantSegment> run(segments.begin() + static_cast<std::ptrdiff_t>(i), segments.begin() + static_cast<std::ptrdiff_t>(end));
    for (int64_t r0 = 0; r0 < n; r0 += per_launch) {
      if (r0 > 0)
        for (QuantSegment& s : run) s.y += per_launch * s.ldy;  // this launch's rows
      const __nv_bfloat16* xr = x + r0 * ldx;
      const int64_t rows = std::min(per_launch, n - r0);
      switch (which.kind) {
        case Kernel::AffineRows: skinny_quant_affine(xr, rows, ldx, run, stream); break;
        case Kernel::AffineTiles: skinny_quant_affine_tiles(xr, rows, ldx, run, stream); break;
        case Kernel::Fp8: skinny_quant_fp8(xr, rows, ldx, run, stream); break;
      }
    }
    i = end;
  }
}

}  // namespace qwenrt::cuda
