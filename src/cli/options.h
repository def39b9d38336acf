#pragma once
// Command-line options of one subcommand: `--name value` and boolean `--flag`s, declared up front
// so that anything unknown or malformed is an error naming it.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace qwenrt::cli {

class Options {
 public:
  Options(std::string command, std::set<std::string> valued, std::set<std::string> flags, std::map<std::string, std::string> short_names = {});
  void parse(const std::vector<std::string>& args);

  const std::string& command() const { return command_; }
  bool has(const std::string& name) const;
  bool flag(const std::string& name) const { return flags_set_.count(name) != 0; }
  std::string str(const std::string& name) const;  // required
  std::string str_or(const std::string& name, const std::string& fallback) const;
  int64_t integer_or(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  double number_or(const std::string& name, double fallback, double lo, double hi) const;

 private:
  std::string command_;
  std::set<std::string> valued_, flags_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_set_;
  std::map<std::string, std::string> short_names_;  // "-p" → "prompt"
};

// "1,2,3" → ids; errors name the option and the bad entry.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

// A whole input file (-f, --request, --batch-file): Error naming `what` and the path when it is not
// a readable regular file (never blocks on a FIFO) or is larger than kMaxInputFileBytes.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;  // 256 MiB
std::string read_input_file(const std::string& path, const std::string& what);

// Text given to the model must be valid UTF-8 (as `tokenize` requires): Error naming `where` and
// the byte offset of the first ill-formed sequence.
void require_utf8(const std::string& text, const std::string& where);

// --threads accepts 1 .. min(kMaxThreads, kThreadsPerHardwareThread × hardware threads).
inline constexpr int64_t kMaxThreads = 1024;
inline constexpr int64_t kThreadsPerHardwareThread = 4;

}  // namespace qwenrt::cli
