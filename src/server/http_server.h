#pragma once
// The HTTP side of `qwenrt serve` (cpp-httplib): routes, API keys, limits, and the bridge from a
// request to the scheduler and back (whole answers or server-sent events). It listens before the
// model is loaded (GET /health answers 503 until set_model), and drains on shutdown.
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "engine/scheduler.h"
#include "server/api_common.h"
#include "server/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace qwenrt::server {

class GuardedServer;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: a free one
  std::string api_key;  // empty: no key needed
  std::size_t max_body_bytes = std::size_t{8} << 20;
  std::size_t max_header_bytes = std::size_t{16} << 10;
  // read: a whole request (line, headers, body) must arrive within it; write: each write of an
  // answer; keep-alive: a connection waits this long for the next request (docs/server.md).
  int read_timeout_s = 30, write_timeout_s = 30, keep_alive_s = 5;
  int threads = 64;         // connections served at once (each streaming answer holds one)
  std::string cors_origin;  // the one origin (scheme://host[:port]) browsers may call from; empty: none
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();

  // Binds and starts serving in the background (only /health answers, 503, until set_model).
  // Returns the port. Throws Error when the address cannot be bound.
  int start();
  // The model and scheduler requests now go to (both outlive the server).
  void set_model(const ServedModel* model, Scheduler* scheduler);
  // Refuses new work (503) and waits (up to `timeout`) until the accepted requests are answered.
  void drain(std::chrono::milliseconds timeout);
  void stop();

 private:
  enum class State { Loading, Ready, Draining };
  void routes();
  void generate(const httplib::Request& req, httplib::Response& res, int api);
  void error(httplib::Response& res, int api, int status, const std::string& message, const std::string& param = "");
  // CORS and the origin check; true when it answered the request (a preflight or a refusal).
  bool check_origin(const httplib::Request& req, httplib::Response& res);

  HttpOptions options_;
  std::unique_ptr<GuardedServer> http_;
  std::thread thread_;
  std::atomic<State> state_{State::Loading};
  std::atomic<int> in_flight_{0};
  StatusCounter statuses_;  // answers by status (/metrics)
  const ServedModel* model_ = nullptr;
  Scheduler* scheduler_ = nullptr;
};

}  // namespace qwenrt::server
