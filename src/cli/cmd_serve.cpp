// qwenrt serve: the OpenAI- and Anthropic-compatible HTTP server (src/server) over the continuous
// batching scheduler (engine/scheduler).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "cli/synthetic_model.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "server/http_server.h"

namespace qwenrt::cli {

namespace {

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

std::size_t available_host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::size_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// The KV pool and the prefix cache, sized once at start-up. The pool: --kv-bytes, else --max-seqs
// full contexts, at most what memory allows after the weights and the sequences' DeltaNet state:
// on the CPU 3/4 of MemAvailable; on a GPU the device's free memory less a reserve for the steps'
// scratch (the larger of 2 GiB and 1/10 of it), so admission, not an allocation failure, says no.
// (The GPU pool is allocated at the first step.) The prefix cache: --cache-bytes (default 1/4 of the pool,
// at least 64 MiB; its KV blocks come out of the pool, its snapshots on top, in host memory on a
// GPU too; 0 turns it off).
void plan_memory(const Options& opt, const Qwen35Model& model, SchedulerOptions& sched) {
  const ModelCache probe = model.new_cache(1);
  const bool cpu = model.device().kind == DeviceSpec::Kind::Cpu;
  const std::size_t block_bytes = probe.kv_bytes_per_block() / (cpu ? 1 : 2);  // f32 on the CPU, bf16 on a GPU
  const int64_t per_context = (sched.ctx_size + Qwen35Model::kCacheBlockSize - 1) / Qwen35Model::kCacheBlockSize;
  int64_t blocks = per_context * sched.max_seqs;
  if (opt.has("kv-bytes")) {
    blocks = block_bytes ? opt.integer_or("kv-bytes", 0, 1, int64_t{1} << 50) / static_cast<int64_t>(block_bytes) : blocks;
  } else if (block_bytes > 0) {
    std::size_t left = 0;
    if (cpu) {
      left = available_host_memory() / 4 * 3;
    } else if (const auto free_bytes = model.device_free_bytes()) {
      const std::size_t reserve = std::max<std::size_t>(std::size_t{2} << 30, *free_bytes / 10);
      left = *free_bytes > reserve ? *free_bytes - reserve : 0;
    }
    const std::size_t state = probe.state_bytes_per_sequence() * static_cast<std::size_t>(sched.max_seqs);
    if (!cpu && left <= state)
      fail("serve: the GPU has ", mib(left), " free for the cache after the weights and a scratch reserve; the DeltaNet state of --max-seqs ",
           sched.max_seqs, " sequences needs ", mib(state), " (lower --max-seqs)");
    if (left > state && static_cast<std::size_t>(blocks) * block_bytes > left - state) {
      blocks = static_cast<int64_t>((left - state) / block_bytes);
      std::fprintf(stderr, "qwenrt serve: the KV pool is %s, what %s memory allows (%d full contexts would need %s)\n",
                   mib(static_cast<std::size_t>(blocks) * block_bytes).c_str(), cpu ? "host" : "GPU", sched.max_seqs,
                   mib(per_context * sched.max_seqs * block_bytes).c_str());
    }
  }
  if (blocks < per_context)
    fail("serve: the KV pool (", blocks, " blocks of ", Qwen35Model::kCacheBlockSize, " tokens) does not hold one --ctx-size context of ",
         sched.ctx_size, " tokens (lower --ctx-size or --max-seqs, or give --kv-bytes)");
  sched.kv_blocks = blocks;
  const std::size_t default_cache = std::max<std::size_t>(std::size_t{64} << 20, static_cast<std::size_t>(blocks) * block_bytes / 4);
  sched.prefix_cache_bytes = static_cast<std::size_t>(opt.integer_or("cache-bytes", static_cast<int64_t>(default_cache), 0, int64_t{1} << 50));
  sched.snapshot_interval = opt.integer_or("snapshot-interval", 2048, 1, int64_t{1} << 30);
}

}  // namespace

int run_serve(const Args& args) {
  const auto started = std::chrono::steady_clock::now();
  // SIGINT / SIGTERM are taken by sigwait below (blocked in every thread started from here on); a
  // write to a closed connection must be an error, not SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Options opt("serve",
              {"model",           "device",       "host",          "port",           "api-key",      "max-seqs",     "ctx-size",          "max-queue",
               "threads",         "http-threads", "prefill-chunk", "max-body-bytes", "kv-bytes",     "cache-bytes",  "snapshot-interval", "cors",
               "request-timeout", "idle-timeout", "synthetic",     "speculative",    "draft-tokens", "spec-max-seqs", "mixed-steps"},
              {kDeterministicFlag}, {{"-m", "model"}});
  opt.parse(args);
  apply_process_options(opt);
  const DeviceSpec device = device_option(opt);
  if (opt.has("model") && opt.has("synthetic")) fail("serve: give --model or --synthetic, not both");
  const std::string synthetic = opt.str_or("synthetic", "");
  const std::string model_dir = synthetic.empty() ? resolve_model_dir(opt) : "synthetic:" + synthetic;

  server::HttpOptions http;
  http.host = opt.str_or("host", "127.0.0.1");
  http.port = static_cast<int>(opt.integer_or("port", 8080, 0, 65535));
  http.api_key = opt.has("api-key") ? opt.str("api-key") : (std::getenv("QWENRT_API_KEY") ? std::getenv("QWENRT_API_KEY") : "");
  http.max_body_bytes = static_cast<std::size_t>(opt.integer_or("max-body-bytes", 8 << 20, 1024, int64_t{1} << 30));
  http.read_timeout_s = static_cast<int>(opt.integer_or("request-timeout", 30, 1, 3600));
  http.keep_alive_s = static_cast<int>(opt.integer_or("idle-timeout", 5, 1, 3600));
  if (opt.has("cors")) {
    http.cors_origin = opt.str("cors");
    if (http.cors_origin.rfind("http://", 0) != 0 && http.cors_origin.rfind("https://", 0) != 0)
      fail("serve: --cors takes one origin, scheme://host[:port] (like http://localhost:3000), got '", http.cors_origin, "'");
    if (http.cors_origin.back() == '/') http.cors_origin.pop_back();  // origins have no path
  }
  SchedulerOptions sched;
  {
    SampledGenerationOptions gen;  // --speculative mtp [--draft-tokens K], --deterministic
    apply_speculation_options(opt, gen);
    sched.speculative = gen.speculative;
    sched.speculation = gen.speculation;
    // Drafting pays while few sequences decode (bench/results/2026-12-05-1700-cpu-serve-mtp.md).
    sched.speculate_max_seqs = static_cast<int>(opt.integer_or("spec-max-seqs", 1, 0, 4096));
    if (opt.has("spec-max-seqs") && !sched.speculative) fail("serve: --spec-max-seqs goes with --speculative mtp");
  }
  sched.max_seqs = static_cast<int>(opt.integer_or("max-seqs", 8, 1, 4096));
  sched.max_queue = static_cast<int>(opt.integer_or("max-queue", 64, 0, 1 << 20));
  // Prompt chunk (and window-step token budget): 512 on the CPU; 2048 on a GPU, where larger
  // windows use the tensor cores better (27B, 32 users with 8k prompts on an H100: 372 output
  // tok/s against 336 at 512; bench/results/2026-12-05-1210-h200.md).
  const int64_t default_chunk = device.kind == DeviceSpec::Kind::Cpu ? 512 : 2048;
  sched.prefill_chunk = sched.window_budget = opt.integer_or("prefill-chunk", default_chunk, 1, 1 << 20);
  // Each streaming answer holds a connection thread; idle keep-alive connections hold one briefly.
  http.threads = static_cast<int>(opt.integer_or("http-threads", std::max(32, 2 * (sched.max_seqs + sched.max_queue)), 4, 65536));

  server::HttpServer server(http);
  const int port = server.start();
  const std::string url = "http://" + (http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host) + ":" + std::to_string(port);
  std::fprintf(stderr, "qwenrt serve: loading %s (listening on %s, /health is 503 until ready)\n", model_dir.c_str(), url.c_str());

  // A checkpoint with its tokenizer and template, or random weights of a released size with a
  // placeholder tokenizer (token ids in, "<id>" text out; the text routes refuse).
  std::unique_ptr<TextSession> session_ptr;
  if (synthetic.empty()) {
    session_ptr = std::make_unique<TextSession>(model_dir, false, device);
  } else {
    auto model = std::make_unique<Qwen35Model>(synthetic_model(synthetic, device, "serve"));
    model->use_device(device);
    const int64_t vocab = model->config().vocab_size;
    session_ptr = std::make_unique<TextSession>(std::move(model), placeholder_tokenizer(vocab));
  }
  const TextSession& session = *session_ptr;
  const int64_t max_pos = session.model().config().max_position_embeddings;
  sched.ctx_size = opt.integer_or("ctx-size", std::min<int64_t>(max_pos, 8192), 16, max_pos);
  if (sched.speculative) require_mtp(session.model(), model_dir);
  // Prompts are cut at fixed positions already (multiples of --prefill-chunk); the model then
  // computes every row as it would alone.
  session.model().set_deterministic(opt.flag(kDeterministicFlag));
  // Decode rows ride in the window steps while prompts prefill (one pass over the weights for
  // both): the GPU's default. Not on the CPU by default (its decode rows are bitwise batch-
  // invariant only in steps of their own) and never with --deterministic.
  const std::string mixed = opt.str_or("mixed-steps", device.kind == DeviceSpec::Kind::Cpu || opt.flag(kDeterministicFlag) ? "off" : "on");
  if (mixed != "on" && mixed != "off") fail("serve: --mixed-steps takes on or off, got '", mixed, "'");
  sched.mixed_steps = mixed == "on";
  if (sched.mixed_steps && opt.flag(kDeterministicFlag)) fail("serve: --mixed-steps on computes decode rows inside prompt windows; --deterministic needs them apart");
  plan_memory(opt, session.model(), sched);
  server::ServedModel served{session, std::filesystem::path(model_dir).lexically_normal().filename().string(), sched.ctx_size, {}};
  served.limits.max_n = sched.max_seqs;
  if (served.id.empty()) served.id = std::filesystem::path(model_dir).lexically_normal().parent_path().filename().string();
  if (!synthetic.empty()) {
    served.id = "synthetic-" + synthetic;
    served.has_text = false;
  }
  Scheduler scheduler(session.model(), session.tokenizer(), session.stop_ids(), sched, ThreadPool::global());
  server.set_model(&served, &scheduler);
  const SchedulerStats st = scheduler.stats();
  const double ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string spec = sched.speculative ? ", MTP speculation up to " + std::to_string(sched.speculation.max_draft_tokens) +
                                                   " drafts while <= " + std::to_string(sched.speculate_max_seqs) + " sequences decode"
                                             : "";
  const std::string det = session.model().deterministic() ? ", deterministic" : "";
  std::printf("qwenrt serve: ready on %s (model %s, %s, %d sequences, context %lld, KV pool %lld tokens, prefix cache %s%s%s) in %.3f s\n", url.c_str(),
              served.id.c_str(), session.model().device_description().c_str(), sched.max_seqs, static_cast<long long>(sched.ctx_size),
              static_cast<long long>(st.kv_blocks * Qwen35Model::kCacheBlockSize), mib(sched.prefix_cache_bytes).c_str(), spec.c_str(), det.c_str(),
              ready_s);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "qwenrt serve: %s, draining\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.drain(std::chrono::seconds(60));
  server.stop();
  std::fprintf(stderr, "qwenrt serve: stopped\n");
  return 0;
}

}  // namespace qwenrt::cli
