#pragma once
// A Hugging Face checkpoint directory as published: config.json plus either one model.safetensors
// or shards listed in model.safetensors.index.json. All shards are mapped and validated up front,
// and every tensor is findable by name.
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace qwenrt {

class CheckpointDir {
 public:
  explicit CheckpointDir(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return by_name_; }
  std::size_t file_count() const { return files_.size(); }

 private:
  void add_file(const std::filesystem::path& path);

  std::filesystem::path dir_;
  nlohmann::json config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
};

}  // namespace qwenrt
