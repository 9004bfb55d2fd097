// A request read by Boost.Beast as the handlers see it (HttpRequest): method, target, headers with
// lower-case names, body. Shared by the server and the HTTP fuzzer, so both hand on the same thing.
//
// Every file that includes Boost.Asio (through Beast or not) includes <climits> before it, so that
// Asio sees IOV_MAX (1,024 on Linux) and reads into up to 64 buffers a call; without it Asio
// assumes 16, and a W1 body's 53 tensors took four receives. The files must agree: Asio's
// templates are instantiated in each of them.
#pragma once

#include <cctype>
#include <climits>  // IOV_MAX, before Asio (below)
#include <string>
#include <utility>

#include <boost/beast/http.hpp>

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
