#include "server/guarded_server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>

namespace qwenrt::server {

namespace {

using Clock = std::chrono::steady_clock;

int poll_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  return r;
}

void ip_and_port(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) return;
  port =
      ntohs(addr.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(addr).sin_port : reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) == 0) ip = host.data();
}

// One connection's socket with the limits of ConnectionLimits on what a request may send.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}

  // Waits for the first byte of the next request: up to request_timeout from `opened` for a
  // connection's first request (a client may be slow to send what it just connected for), up to
  // idle_timeout for the next one on a kept-alive connection. False: none came, the peer left or
  // the server stops.
  bool wait_for_request(const std::atomic<socket_t>& server_socket, bool first, Clock::time_point opened) {
    if (off_ < len_) return true;
    const auto until = first ? opened + limits_.request_timeout : Clock::now() + limits_.idle_timeout;
    while (server_socket != INVALID_SOCKET) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      const int r = poll_fd(fd_, POLLIN, static_cast<int>(std::min<int64_t>(left, 100)));  // short slices: see a stop soon
      if (r < 0) return false;
      if (r > 0) return true;
    }
    return false;
  }

  // A request broke a limit (time or size): what is left on the connection is not trusted.
  bool over_limit() const { return over_limit_; }

  void begin_request() {
    deadline_ = Clock::now() + limits_.request_timeout;
    in_headers_ = true;
    tail_ = 0;
    header_bytes_ = body_bytes_ = 0;
  }

  bool is_readable() const override { return off_ < len_ || poll_fd(fd_, POLLIN, left_ms()) > 0; }

  bool is_writable() const override { return poll_fd(fd_, POLLOUT, static_cast<int>(limits_.write_timeout.count())) > 0 && alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == len_) {
      const int wait = left_ms();
      if (wait <= 0 || poll_fd(fd_, POLLIN, wait) <= 0) {  // the request took too long
        over_limit_ = true;
        return -1;
      }
      ssize_t n;
      do n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      len_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, len_ - off_);
    if (!account(buffer_.data() + off_, n)) {
      over_limit_ = true;
      return -1;
    }
    std::memcpy(ptr, buffer_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int left_ms() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
  }

  // A peer that closed its side shows as readable with nothing to read.
  bool alive() const {
    if (off_ < len_ || poll_fd(fd_, POLLIN, 0) == 0) return true;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  // Counts the bytes handed to the parser: header bytes until the blank line that ends them, body
  // bytes after. False past a limit.
  bool account(const char* p, std::size_t n) {
    std::size_t i = 0;
    for (; in_headers_ && i < n; ++i) {
      tail_ = (tail_ << 8) | static_cast<uint8_t>(p[i]);
      if (++header_bytes_ > limits_.max_header_bytes) return false;
      if (tail_ == 0x0d0a0d0au) in_headers_ = false;  // "\r\n\r\n"
    }
    body_bytes_ += n - i;
    return body_bytes_ <= limits_.max_body_bytes;
  }

  int fd_;
  const ConnectionLimits& limits_;
  std::array<char, 4096> buffer_{};
  std::size_t off_ = 0, len_ = 0;  // unread bytes of buffer_
  Clock::time_point deadline_ = Clock::now();
  bool in_headers_ = true;
  uint32_t tail_ = 0;
  std::size_t header_bytes_ = 0, body_bytes_ = 0;
  bool over_limit_ = false;
};

}  // namespace

bool GuardedServer::widen_backlog() { return svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, SOMAXCONN) == 0; }

bool GuardedServer::process_and_close_socket(socket_t sock) {
  const auto opened = Clock::now();
  GuardedStream stream(sock, limits_);
  bool ok = false;
  for (std::size_t left = limits_.max_requests_per_connection; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!stream.wait_for_request(svr_sock_, left == limits_.max_requests_per_connection, opened)) break;
    stream.begin_request();
    bool closed = false;
    ok = process_request(stream, left == 1, closed, nullptr);
    if (!ok || closed || stream.over_limit()) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace qwenrt::server
