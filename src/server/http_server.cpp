#include "server/http_server.h"

#include <httplib.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "server/anthropic_api.h"
#include "server/auth.h"
#include "server/guarded_server.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/web_assets.h"

namespace qwenrt::server {

namespace {

enum Api { kOpenAiChat = 0, kOpenAiCompletion = 1, kAnthropic = 2 };

constexpr auto kPoll = std::chrono::milliseconds(1000);  // a stream writes a keep-alive comment when idle this long

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// Counts a request as in flight for drain().
struct InFlight {
  explicit InFlight(std::atomic<int>& n) : n(n) { ++n; }
  ~InFlight() {
    if (!released) --n;
  }
  std::atomic<int>& n;
  bool released = false;
};

// What the connection loop enforces (server/guarded_server.h). The body budget is twice the API's
// limit so that a body just over it is read to its end and answered 413, not cut off.
ConnectionLimits connection_limits(const HttpOptions& o) {
  ConnectionLimits l;
  l.idle_timeout = std::chrono::seconds(o.keep_alive_s);
  l.request_timeout = std::chrono::seconds(o.read_timeout_s);
  l.write_timeout = std::chrono::seconds(o.write_timeout_s);
  l.max_header_bytes = 2 * o.max_header_bytes;
  l.max_body_bytes = 2 * o.max_body_bytes + (std::size_t{64} << 10);
  return l;
}

bool is_static_file(const std::string& path) {
  for (const auto& f : web::embedded_files())
    if (f.url == path) return true;
  return false;
}

// The chat page asks for nothing outside the server (no CDN, no inline script).
constexpr const char* kPagePolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

}  // namespace

HttpServer::HttpServer(HttpOptions options) : options_(std::move(options)), http_(std::make_unique<GuardedServer>(connection_limits(options_))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::error(httplib::Response& res, int api, int status, const std::string& message, const std::string& param) {
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  send_json(res, status, api == kAnthropic ? anthropic::error_body(status, message) : openai::error_body(status, message, param));
}

int HttpServer::start() {
  auto& h = *http_;
  const int threads = options_.threads;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  h.set_read_timeout(options_.read_timeout_s);  // the whole request: GuardedServer
  h.set_write_timeout(options_.write_timeout_s);
  h.set_payload_max_length(options_.max_body_bytes);
  h.set_tcp_nodelay(true);
  routes();
  const int port = options_.port == 0 ? h.bind_to_any_port(options_.host) : (h.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) fail("serve: cannot listen on ", options_.host, ":", options_.port);
  if (!h.widen_backlog()) fail("serve: cannot listen on ", options_.host, ":", port, ": ", std::strerror(errno));
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return port;
}

void HttpServer::set_model(const ServedModel* model, Scheduler* scheduler) {
  model_ = model;
  scheduler_ = scheduler;
  state_ = State::Ready;
}

void HttpServer::drain(std::chrono::milliseconds timeout) {
  state_ = State::Draining;
  if (scheduler_) {
    scheduler_->close();
    scheduler_->wait_idle(timeout);
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (in_flight_ > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void HttpServer::stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::check_origin(const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  const bool allowed = !origin.empty() && origin == options_.cors_origin;
  if (allowed) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
    res.set_header("Access-Control-Expose-Headers", "Retry-After");
  }
  if (req.method == "OPTIONS") {  // a preflight (or a plain OPTIONS): no key needed, no body
    res.status = allowed || origin.empty() ? 204 : 403;
    res.set_header("Allow", "GET, POST, OPTIONS");
    if (allowed) {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      // The headers the page asks for (the official clients add their own x-stainless-* ones).
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type, x-api-key, anthropic-version" : asked);
      res.set_header("Access-Control-Max-Age", "600");
    }
    return true;
  }
  // A browser names the page's origin on requests that change things; one that is neither this
  // server (the chat page) nor the --cors origin is refused, so another site cannot make a
  // visitor's browser run generations here (it could not read the answer, but the work would run).
  if (!origin.empty() && !allowed && origin != "http://" + req.get_header_value("Host")) {
    error(res, req.path.rfind("/v1/messages", 0) == 0 ? kAnthropic : kOpenAiChat, 403,
          "requests from origin " + origin + " are not allowed (start the server with --cors ORIGIN)");
    return true;
  }
  return false;
}

void HttpServer::routes() {
  auto& h = *http_;
  auto api_of = [](const std::string& path) { return path.rfind("/v1/messages", 0) == 0 ? kAnthropic : kOpenAiChat; };

  // Before any route: origin (CORS), header size, API key, readiness. The chat page's files and
  // /health need no key: the page holds no data and asks for the key itself (a browser cannot send
  // one when it loads a page).
  h.set_pre_routing_handler([this, api_of](const httplib::Request& req, httplib::Response& res) {
    if (check_origin(req, res)) return httplib::Server::HandlerResponse::Handled;
    std::size_t header_bytes = req.path.size();
    for (const auto& [k, v] : req.headers) header_bytes += k.size() + v.size() + 4;
    if (header_bytes > options_.max_header_bytes) {
      error(res, api_of(req.path), 431, "the request headers are larger than " + std::to_string(options_.max_header_bytes) + " bytes");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health" || (req.method == "GET" && is_static_file(req.path))) return httplib::Server::HandlerResponse::Unhandled;
    if (!authorized(options_.api_key, req.get_header_value("Authorization"), req.get_header_value("x-api-key"))) {
      error(res, api_of(req.path), 401, "a valid API key is required (Authorization: Bearer KEY or x-api-key: KEY)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (state_ != State::Ready) {
      error(res, api_of(req.path), 503, state_ == State::Loading ? "the model is loading" : "the server is shutting down");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors without a body (no route, a body over the limit) get one in the API's shape.
  h.set_error_handler(httplib::Server::HandlerWithResponse([this, api_of](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int status = res.status;
    std::string message = status == 404   ? "no route " + req.method + " " + req.path
                          : status == 413 ? "the request body is larger than " + std::to_string(options_.max_body_bytes) + " bytes"
                                          : "HTTP error " + std::to_string(status);
    error(res, api_of(req.path), status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([this, api_of](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {}
    error(res, api_of(req.path), 500, what);
  });

  for (const auto& f : web::embedded_files()) {
    std::string pattern;  // the path as a regular expression
    for (char c : f.url) pattern += std::isalnum(static_cast<unsigned char>(c)) || c == '/' ? std::string(1, c) : std::string("\\") + c;
    h.Get(pattern, [&f](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy", kPagePolicy);
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Cache-Control", "no-cache");
      res.set_content(f.body.data(), f.body.size(), std::string(f.mime) + "; charset=utf-8");
    });
  }
  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const State s = state_;
    if (s == State::Ready) return send_json(res, 200, {{"status", "ok"}});
    res.set_header("Retry-After", "1");
    send_json(res, 503, {{"status", s == State::Loading ? "loading" : "draining"}});
  });
  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", model_->id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "qwenrt"}, {"max_model_len", model_->ctx_size}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
  });
  // Prometheus text format (server/metrics); every answer is counted by status as it goes out.
  h.set_logger([this](const httplib::Request&, const httplib::Response& res) { statuses_.add(res.status); });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(scheduler_->stats(), statuses_, in_flight_.load()), "text/plain; version=0.0.4");
  });
  h.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, kOpenAiChat); });
  h.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, kOpenAiCompletion); });
  h.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, kAnthropic); });
  h.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json body = parse_body(req.body);
      std::vector<int32_t> tokens;
      if (body.contains("messages")) {
        tokens = openai::chat_prompt(body, *model_);
      } else {
        const auto prompt = get_string(body, "prompt");
        if (!prompt) bad_field("prompt", "is required (or messages)");
        require_text(*model_, "prompt");
        tokens = model_->session.tokenizer().encode(*prompt);
      }
      send_json(res, 200, {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", model_->ctx_size}});
    } catch (const RequestError& e) {
      error(res, kOpenAiChat, e.status, e.what(), e.param);
    }
  });
  h.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json body = parse_body(req.body);
      require_text(*model_, "tokens");
      const json* tokens = get_array(body, "tokens");
      if (!tokens) bad_field("tokens", "is required");
      std::vector<int32_t> ids;
      const int64_t vocab = model_->session.tokenizer().vocab_size();
      for (std::size_t i = 0; i < tokens->size(); ++i) {
        const json& t = (*tokens)[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
          bad_field("tokens[" + std::to_string(i) + "]", "must be a token id in [0, " + std::to_string(vocab) + ")");
        ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      send_json(res, 200, {{"prompt", model_->session.tokenizer().decode(ids)}});
    } catch (const RequestError& e) {
      error(res, kOpenAiChat, e.status, e.what(), e.param);
    }
  });
}

void HttpServer::generate(const httplib::Request& req, httplib::Response& res, int api) {
  auto in_flight = std::make_shared<InFlight>(in_flight_);
  ParsedRequest parsed;
  std::shared_ptr<RequestHandle> handle;
  try {
    const json body = parse_body(req.body);
    parsed = api == kAnthropic    ? anthropic::parse_messages(body, *model_)
             : api == kOpenAiChat ? openai::parse_chat(body, *model_)
                                  : openai::parse_completion(body, *model_);
  } catch (const RequestError& e) {
    return error(res, api, e.status, e.what(), e.param);
  }
  const int64_t prompt_tokens = static_cast<int64_t>(parsed.gen.prompt.size());
  try {
    handle = scheduler_->submit(std::move(parsed.gen));
  } catch (const SubmitError& e) {
    const int status = e.kind == SubmitError::Kind::QueueFull ? 429 : e.kind == SubmitError::Kind::Closed ? 503 : 400;
    return error(res, api, status, e.what(), e.kind == SubmitError::Kind::TooLong ? "max_tokens" : "");
  }

  if (!parsed.stream) {
    Collected c;
    std::vector<GenerationEvent> events;
    while (handle->wait(events, kPoll)) {
      for (const auto& e : events) c.add(e);
      events.clear();
    }
    if (c.finish.finish == FinishReason::Error) return error(res, api, 500, "generation failed: " + c.finish.error);
    if (c.finish.finish == FinishReason::Cancelled) return error(res, api, 503, "the request was cancelled (the server is stopping)");
    if (api == kAnthropic) return send_json(res, 200, anthropic::Response(model_->id).whole(c));
    return send_json(res, 200, openai::Response(api == kOpenAiChat, model_->id, false).whole(c));
  }

  // Streaming: the provider runs on this connection's thread, one call per batch of events. A
  // failed write (the client left) cancels the request; the scheduler frees its slot.
  struct Stream {
    std::shared_ptr<RequestHandle> handle;
    std::unique_ptr<openai::Response> openai;
    std::unique_ptr<anthropic::Response> anthropic;
    bool started = false;
  };
  auto st = std::make_shared<Stream>();
  st->handle = handle;
  if (api == kAnthropic) st->anthropic = std::make_unique<anthropic::Response>(model_->id);
  else st->openai = std::make_unique<openai::Response>(api == kOpenAiChat, model_->id, parsed.include_usage);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, prompt_tokens](std::size_t, httplib::DataSink& sink) {
        std::string text;
        if (!st->started) {
          st->started = true;
          text = st->anthropic ? st->anthropic->stream_start(prompt_tokens) : st->openai->stream_start();
        }
        std::vector<GenerationEvent> events;
        const bool more = st->handle->wait(events, text.empty() ? kPoll : std::chrono::milliseconds(0));
        bool finished = !more;
        for (const auto& e : events) {
          text += st->anthropic ? st->anthropic->stream_event(e) : st->openai->stream_event(e);
          finished |= e.last;
        }
        if (text.empty() && !finished) text = ": keep-alive\n\n";  // SSE comment: shows a closed connection
        if (!text.empty() && !sink.write(text.data(), text.size())) {
          st->handle->cancel();
          return false;
        }
        if (finished) sink.done();
        return true;
      },
      [st, in_flight](bool) {
        st->handle->cancel();  // no-op when finished
        in_flight->released = true;
        --in_flight->n;
      });
}

}  // namespace qwenrt::server
