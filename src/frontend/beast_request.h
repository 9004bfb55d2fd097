// A request read by Boost.Beast as the handlers see it (HttpRequest): method, target, headers with
// lower-case names, body. Shared by the server and the HTTP fuzzer, so both hand on the same thing.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <utility>

#include <boost/beast/http.hpp>

#include "frontend/http_server.h"

namespace rankd {

// A request body read into a std::string, as Beast's string_body reads it except that it grows by
// appending into the room reserved from Content-Length: string_body's reader resizes first, writing
// zeros over every byte it then copies (a W1 request's 476 KB).
struct AppendStringBody {
  using value_type = std::string;
  using writer = boost::beast::http::string_body::writer;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<size_t>(*length));
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const std::size_t extra = boost::beast::buffer_bytes(buffers);
      if (extra > body_.max_size() - body_.size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return 0;
      }
      ec = {};
      for (auto b : boost::beast::buffers_range_ref(buffers))
        body_.append(static_cast<const char*>(b.data()), b.size());
      return extra;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

inline HttpRequest ToHttpRequest(boost::beast::http::request<AppendStringBody>&& req) {
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
