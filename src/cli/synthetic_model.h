#pragma once
// Random weights with the shapes of a released Qwen 3.5 size (model/released_shapes.h), for
// `bench --synthetic` and `serve --synthetic`: speed measurements that need no download.
#include <cstddef>
#include <string>

#include "backend/device.h"
#include "model/qwen35_model.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt::cli {

// Weights of the layers' matrices (all experts of a MoE layer; no embedding or head).
std::size_t matmul_params(const ModelConfig& c);

// The model of size `name` (0.8b, 2b, ...) with seeded random weights in `format`, for `device` (its
// matrices are made there by use_device(device), which the caller runs). Error naming `command` when
// the host has too little memory for them.
Qwen35Model synthetic_model(const std::string& name, const DeviceSpec& device, const std::string& command,
                            SyntheticFormat format = SyntheticFormat::BF16);

// A stand-in tokenizer for a synthetic model: token id i is the text "<i>" (special ids none). It
// lets the server stream what such a model generates; it encodes nothing useful, so text input to a
// synthetic model is refused before it gets here.
text::Tokenizer placeholder_tokenizer(int64_t vocab_size);

}  // namespace qwenrt::cli
