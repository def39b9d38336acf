#include "formats/checkpoint_dir.h"

#include <set>

#include "core/error.h"
#include "formats/json_file.h"

namespace qwenrt {

namespace fs = std::filesystem;

CheckpointDir::CheckpointDir(const fs::path& dir) : dir_(dir) {
  if (!fs::is_directory(dir)) fail(dir.string(), ": not a checkpoint directory (does not exist or is not a directory)");
  fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) fail(dir.string(), ": no config.json");
  config_ = read_json_file(config_path);
  if (!config_.is_object()) fail(config_path.string(), ": must hold a JSON object");

  fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    nlohmann::json index = read_json_file(index_path);
    auto map = index.find("weight_map");
    if (!index.is_object() || map == index.end() || !map->is_object()) fail(index_path.string(), ": needs a \"weight_map\" object");
    // The index names the shard of every tensor; load each shard once, then check both agree.
    std::set<std::string> shards;
    for (const auto& [name, file] : map->items()) {
      if (!file.is_string()) fail(index_path.string(), ": weight_map entry '", name, "' must name a file");
      std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "..")
        fail(index_path.string(), ": weight_map entry '", name, "' names an invalid file '", f, "'");
      shards.insert(f);
    }
    if (shards.empty()) fail(index_path.string(), ": weight_map is empty");
    for (const auto& f : shards) {
      if (!fs::exists(dir / f)) fail(index_path.string(), ": shard ", f, " is missing");
      add_file(dir / f);
    }
    for (const auto& [name, file] : map->items()) {
      auto it = by_name_.find(name);
      if (it == by_name_.end()) fail(index_path.string(), ": tensor '", name, "' is listed in ", file.get<std::string>(), " but not stored there");
      if (fs::path(it->second->file).filename() != file.get<std::string>())
        fail(index_path.string(), ": tensor '", name, "' is listed in ", file.get<std::string>(), " but stored in ", it->second->file);
    }
    for (const auto& [name, t] : by_name_)
      if (!map->contains(name)) fail(t->file, ": tensor '", name, "' is not listed in ", index_path.string());
  } else if (fs::exists(dir / "model.safetensors")) {
    add_file(dir / "model.safetensors");
  } else {
    fail(dir.string(), ": no model.safetensors or model.safetensors.index.json");
  }
}

void CheckpointDir::add_file(const fs::path& path) {
  files_.push_back(std::make_unique<SafetensorsFile>(path));
  for (const auto& t : files_.back()->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted) fail(path.string(), ": tensor '", t.name, "' is also stored in ", it->second->file);
  }
}

const TensorInfo* CheckpointDir::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace qwenrt
