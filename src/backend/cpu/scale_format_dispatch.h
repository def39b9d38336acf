#pragma once
// The dense format of a quantized matrix's scales (f32, f16 or bf16: all the loaders accept) as a
// template argument, so that a kernel reads its scales without a branch per scale.
#include "backend/weight.h"

namespace qwenrt::cpu {

// fn.template operator()<S>() with S = f (a generic lambda with a template parameter).
template <class Fn>
decltype(auto) with_scale_format(WeightFormat f, Fn&& fn) {
  switch (f) {
    case WeightFormat::F32: return fn.template operator()<WeightFormat::F32>();
    case WeightFormat::F16: return fn.template operator()<WeightFormat::F16>();
    default: return fn.template operator()<WeightFormat::BF16>();
  }
}

}  // namespace qwenrt::cpu
