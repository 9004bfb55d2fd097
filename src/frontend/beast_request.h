// A request read by Boost.Beast as the handlers see it (HttpRequest): method, target, headers with
// lower-case names, body. Shared by the server and the HTTP fuzzer, so both hand on the same thing.
#pragma once

#include <cctype>
#include <string>
#include <utility>

#include "frontend/asio.h"
#include "frontend/http_server.h"

namespace rankd {

inline HttpRequest ToHttpRequest(boost::beast::http::request<boost::beast::http::string_body>&& req) {
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    request.headers[name] = std::string(field.value());
  }
  request.body = std::move(req.body());
  return request;
}

}  // namespace rankd
