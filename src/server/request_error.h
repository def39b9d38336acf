#pragma once
// A request the server refuses: the HTTP status, the field at fault (JSON path, may be empty) and a
// message. Each API formats it in its own error shape.
#include <stdexcept>
#include <string>

namespace qwenrt::server {

class RequestError : public std::runtime_error {
 public:
  RequestError(int status, std::string param, const std::string& message) : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;
  std::string param;
};

}  // namespace qwenrt::server
