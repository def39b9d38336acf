#pragma once
// Runs a shell command and captures its exit status, stdout and stderr (for end-to-end CLI tests).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace qwenrt::test {

struct CommandResult {
  int status;
  std::string out, err;
};

inline CommandResult run_command(const std::string& cmd) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() / ("qwenrt_cmd_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out", err_path = base.string() + ".err";
  const int raw = std::system((cmd + " >" + out_path + " 2>" + err_path).c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  CommandResult r{WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), slurp(out_path), slurp(err_path)};
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

inline std::string cli() { return QWENRT_CLI_PATH; }

}  // namespace qwenrt::test
