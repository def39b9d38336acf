// qwenrt serve: the OpenAI- and Anthropic-compatible HTTP server (src/server) over the continuous
// batching scheduler (engine/scheduler).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "server/http_server.h"

namespace qwenrt::cli {

int run_serve(const Args& args) {
  // SIGINT / SIGTERM are taken by sigwait below (blocked in every thread started from here on); a
  // write to a closed connection must be an error, not SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Options opt("serve",
              {"model", "device", "host", "port", "api-key", "max-seqs", "ctx-size", "max-queue", "threads", "http-threads", "prefill-chunk",
               "max-body-bytes"},
              {}, {{"-m", "model"}});
  opt.parse(args);
  apply_threads(opt);
  const DeviceSpec device = device_option(opt);
  const std::string model_dir = resolve_model_dir(opt);

  server::HttpOptions http;
  http.host = opt.str_or("host", "127.0.0.1");
  http.port = static_cast<int>(opt.integer_or("port", 8080, 0, 65535));
  http.api_key = opt.has("api-key") ? opt.str("api-key") : (std::getenv("QWENRT_API_KEY") ? std::getenv("QWENRT_API_KEY") : "");
  http.max_body_bytes = static_cast<std::size_t>(opt.integer_or("max-body-bytes", 8 << 20, 1024, int64_t{1} << 30));
  SchedulerOptions sched;
  sched.max_seqs = static_cast<int>(opt.integer_or("max-seqs", 8, 1, 4096));
  sched.max_queue = static_cast<int>(opt.integer_or("max-queue", 64, 0, 1 << 20));
  sched.prefill_chunk = sched.window_budget = opt.integer_or("prefill-chunk", 512, 1, 1 << 20);
  // Each streaming answer holds a connection thread; idle keep-alive connections hold one briefly.
  http.threads = static_cast<int>(opt.integer_or("http-threads", std::max(32, 2 * (sched.max_seqs + sched.max_queue)), 4, 65536));

  server::HttpServer server(http);
  const int port = server.start();
  const std::string url = "http://" + (http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host) + ":" + std::to_string(port);
  std::fprintf(stderr, "qwenrt serve: loading %s (listening on %s, /health is 503 until ready)\n", model_dir.c_str(), url.c_str());

  TextSession session(model_dir, false, device);
  const int64_t max_pos = session.model().config().max_position_embeddings;
  sched.ctx_size = opt.integer_or("ctx-size", std::min<int64_t>(max_pos, 8192), 16, max_pos);
  server::ServedModel served{session, std::filesystem::path(model_dir).lexically_normal().filename().string(), sched.ctx_size, {}};
  if (served.id.empty()) served.id = std::filesystem::path(model_dir).lexically_normal().parent_path().filename().string();
  Scheduler scheduler(session.model(), session.tokenizer(), session.stop_ids(), sched, ThreadPool::global());
  server.set_model(&served, &scheduler);
  std::printf("qwenrt serve: ready on %s (model %s, %s, %d sequences, context %lld)\n", url.c_str(), served.id.c_str(),
              session.model().device_description().c_str(), sched.max_seqs, static_cast<long long>(sched.ctx_size));
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
