#pragma once
#include <cuda_runtime_api.h>

#include "core/error.h"
#define QWENRT_CUDA_CHECK(expr) \
  do {                          \
    (void)(expr);               \
  } while (0)
#define QWENRT_CUDA_CHECK_LAUNCH() \
  do {                             \
  } while (0)
