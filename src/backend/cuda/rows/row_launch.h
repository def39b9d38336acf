#pragma once
// What the row kernels (rows/*.cu) share: their block sizes, the grid's row limit and the check of
// a row count. Host and device code.
#include <cstdint>

#include "core/error.h"

namespace qwenrt::cuda::row_launch {

constexpr int kThreads = 256;
// A decode step has one row: a row's whole width must spread over many threads (norms) or many
// blocks (SwiGLU), or a single multiprocessor works through it alone (measured on an H200: 55 us
// for one 27B SwiGLU row on one 256-thread block, 11 us for one RMSNorm row).
constexpr int kRowThreads = 1024;
constexpr int kMaxGridY = 65535;

inline void check_rows(int64_t rows, const char* op) {
  if (rows < 0 || rows > (1ll << 31) - 1) fail(op, ": ", rows, " rows is out of range");
}

}  // namespace qwenrt::cuda::row_launch
