#pragma once
// Where a command runs: `cpu`, `cuda` (device 0) or `cuda:N`, as the --device option spells it.
#include <string>
#include <string_view>

namespace qwenrt {

struct DeviceSpec {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int index = 0;  // CUDA device ordinal

  std::string name() const;  // "cpu", "cuda:0"
};

// Parses the option; Error on anything else, naming the text and the accepted forms.
DeviceSpec parse_device(std::string_view text);

// Whether this build has the CUDA backend compiled in.
bool cuda_backend_built();

// For a CUDA spec: Error unless the build has the backend, a driver is present, the ordinal exists
// and the GPU's architecture is supported (compute capability 8.0 or newer). The message says what
// is there instead. No-op for the CPU.
void require_device(const DeviceSpec& spec);

}  // namespace qwenrt
