// RuntimeOptions parsing (plain C++: runs without a GPU).
#include "backend/cuda/runtime/runtime_options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"

namespace qwenrt {
namespace {

cuda::RuntimeOptions parse(const std::map<std::string, std::string>& env) {
  return cuda::parse_runtime_options([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string described(const cuda::RuntimeOptions& o) {
  std::string s;
  for (const auto& [name, value] : o.describe()) s += (s.empty() ? "" : " ") + name + "=" + value;
  return s;
}

TEST(CudaRuntimeOptions, DefaultsWhenUnsetOrEmpty) {
  const cuda::RuntimeOptions o = parse({});
  EXPECT_TRUE(o.graphs);
  EXPECT_TRUE(o.pdl);
  EXPECT_TRUE(o.prefetch_l2);
  EXPECT_FALSE(o.profile);
  EXPECT_EQ(o.launch_trace, "");
  EXPECT_TRUE(o.state_wgmma);
  EXPECT_TRUE(o.moe_wgmma);
  EXPECT_EQ(described(o), "graphs=1 pdl=1 prefetch_l2=1 profile=0 launch_trace= state_wgmma=1 moe_wgmma=1");
  EXPECT_EQ(described(parse({{"QWENRT_CUDA_GRAPHS", ""}, {"QWENRT_CUDA_PROFILE", ""}, {"QWENRT_CUDA_LAUNCH_TRACE", ""}})), described(o));
}

TEST(CudaRuntimeOptions, ReadsEverySwitch) {
  const cuda::RuntimeOptions o = parse({{"QWENRT_CUDA_GRAPHS", "0"},
                                        {"QWENRT_CUDA_PDL", "0"},
                                        {"QWENRT_CUDA_PREFETCH_L2", "0"},
                                        {"QWENRT_CUDA_PROFILE", "1"},
                                        {"QWENRT_CUDA_LAUNCH_TRACE", "t.csv"},
                                        {"QWENRT_CUDA_STATE_WGMMA", "0"},
                                        {"QWENRT_CUDA_MOE_WGMMA", "0"}});
  EXPECT_EQ(described(o), "graphs=0 pdl=0 prefetch_l2=0 profile=1 launch_trace=t.csv state_wgmma=0 moe_wgmma=0");
  EXPECT_EQ(described(parse({{"QWENRT_CUDA_GRAPHS", "1"}, {"QWENRT_CUDA_PROFILE", "0"}})), described(parse({})));
}

TEST(CudaRuntimeOptions, InvalidValueIsAnErrorNamingTheVariable) {
  for (const char* name : {"QWENRT_CUDA_GRAPHS", "QWENRT_CUDA_PDL", "QWENRT_CUDA_PREFETCH_L2", "QWENRT_CUDA_PROFILE", "QWENRT_CUDA_STATE_WGMMA",
                           "QWENRT_CUDA_MOE_WGMMA"}) {
    try {
      parse({{name, "maybe"}});
      ADD_FAILURE() << name << "=maybe was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(name) + "=maybe"), std::string::npos) << what;
      EXPECT_NE(what.find("0 or 1"), std::string::npos) << what;
    }
  }
  // The old ring switch is gone: it is no longer read at all.
  EXPECT_EQ(described(parse({{"QWENRT_CUDA_RING", "all"}})), described(parse({})));
}

TEST(CudaRuntimeOptions, ScopedOptionsReplaceAndRestore) {
  const std::string before = described(cuda::runtime_options());
  cuda::RuntimeOptions changed = cuda::runtime_options();
  changed.state_wgmma = !changed.state_wgmma;
  {
    const cuda::ScopedRuntimeOptions scope(changed);
    EXPECT_EQ(cuda::runtime_options().state_wgmma, changed.state_wgmma);
  }
  EXPECT_EQ(described(cuda::runtime_options()), before);
}

}  // namespace
}  // namespace qwenrt
