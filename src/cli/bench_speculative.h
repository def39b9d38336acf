#pragma once
// qwenrt bench --speculative mtp: plain and speculative greedy decode timed on the same text.
#include "backend/device.h"

namespace qwenrt::cli {

class Options;
int run_bench_speculative(const Options& opt, const DeviceSpec& device);

}  // namespace qwenrt::cli
