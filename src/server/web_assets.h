#pragma once
// The chat page's files (src/server/web/), embedded in the binary at build time by
// cmake/embed_files.cmake, so `qwenrt serve` needs no files beside it and no network.
#include <span>
#include <string_view>

namespace qwenrt::server::web {

struct EmbeddedFile {
  std::string_view url;   // "/", "/chat.js", ...
  std::string_view mime;  // Content-Type without parameters (the files are UTF-8)
  std::string_view body;
};

std::span<const EmbeddedFile> embedded_files();

}  // namespace qwenrt::server::web
