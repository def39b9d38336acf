#pragma once
// cpp-httplib's Server with bounds on each connection that its 0.11 connection loop lacks.
//
// cpp-httplib 0.11 reads a request with a timeout per recv() only, keeps no count of header lines
// and grows a header line without bound until its newline, so a client that trickles a byte every
// few seconds (or sends endless headers) holds a connection thread, and memory, forever. This class
// replaces only the per-connection loop (process_and_close_socket, a virtual of httplib::Server)
// and the socket stream under it; parsing, routing and writing stay the library's:
//   - a new connection's first request must begin within `request_timeout` of the connection,
//     a kept-alive connection's next one within `idle_timeout` of the last answer,
//   - a request (request line, headers and body) must arrive within `request_timeout` of its first
//     byte,
//   - the request line and headers are at most `max_header_bytes`, the body at most `max_body_bytes`
//     (past either, reading fails and the connection closes),
//   - a response write waits at most `write_timeout` for the socket to take data.
// Over the limits the connection is closed; the thread goes back to the pool.
// It also listens with the system's backlog (widen_backlog): 0.11 listens with 5, and a burst of
// clients past it overflows the accept queue (dropped handshakes and SYN cookies; under ASan's
// slowdown a flood test saw a connection reset before any answer).
#include <httplib.h>

#include <chrono>
#include <cstddef>

namespace qwenrt::server {

struct ConnectionLimits {
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
  std::size_t max_header_bytes = std::size_t{32} << 10;
  std::size_t max_body_bytes = std::size_t{8} << 20;
  std::size_t max_requests_per_connection = 1000;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits) : limits_(limits) {}
  // After bind_to_port: listen again with backlog SOMAXCONN (the kernel caps it at
  // net.core.somaxconn). False if the socket is not bound or listen fails.
  bool widen_backlog();

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionLimits limits_;
};

}  // namespace qwenrt::server
