// An error the server answers with an OpenAI-style JSON body and an HTTP status. Request
// parsing and the routes throw it; kael library errors are mapped onto it in routes.cpp.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace kael::serve {

class HttpError : public std::runtime_error {
 public:
  // `type` follows OpenAI's error types ("invalid_request_error", "server_error", ...);
  // `param` names the offending request field, or is empty.
  HttpError(int status, std::string message, std::string param = {}, std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)), type_(std::move(type)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }

 private:
  int status_;
  std::string param_;
  std::string type_;
};

}  // namespace kael::serve
