#pragma once
// `qwenrt info --check`: one pass over every floating-point tensor of a checkpoint (BF16, F16, F32,
// F64: what the loader accepts, plus F64), counting NaN and Inf values in place in the mapped data.
#include <cstdint>
#include <string>
#include <vector>

namespace qwenrt {

class CheckpointDir;
class ThreadPool;

struct NonFiniteTensor {
  std::string name, file;
  int64_t nan = 0, inf = 0;
  int64_t first_index = -1;  // flat (row-major) index of the first non-finite value
};

struct CheckpointScan {
  std::vector<NonFiniteTensor> non_finite;  // by tensor name
  int64_t tensors_scanned = 0, values_scanned = 0;
  std::vector<std::string> skipped;  // tensors of other dtypes (integers), not scanned; FP8 NaN codes are counted
};

CheckpointScan scan_non_finite(const CheckpointDir& checkpoint, ThreadPool& pool);

}  // namespace qwenrt
