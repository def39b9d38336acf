#pragma once
// Whether the kernels may take the warpgroup-product (wgmma) paths: this build carries sm_90a code
// and the current device runs it. Asked once per process.
namespace qwenrt::cuda {
bool wgmma_available();
}
