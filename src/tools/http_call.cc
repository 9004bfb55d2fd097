#include "tools/http_call.h"

#include <chrono>

#include "frontend/asio.h"

namespace rankd {

StatusOr<HttpAnswer> HttpCall(const std::string& host, int port, const std::string& verb, const std::string& target,
                              const std::string& body, double timeout_seconds) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  const std::string where = verb + " " + target + " at " + host + ":" + std::to_string(port);
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  beast::error_code ec;
  auto resolved = asio::ip::tcp::resolver(io).resolve(host, std::to_string(port), ec);
  if (ec) return Unavailable(where + ": cannot resolve the host: " + ec.message());
  http::request<http::string_body> request(http::string_to_verb(verb), target, 11);
  request.set(http::field::host, host);
  if (!body.empty()) request.set(http::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  // The stream's deadline holds for asynchronous operations only: connect, write and read so.
  stream.async_connect(resolved, [&](beast::error_code e, const asio::ip::tcp::endpoint&) {
    if ((ec = e)) return;
    http::async_write(stream, request, [&](beast::error_code e2, size_t) {
      if ((ec = e2)) return;
      http::async_read(stream, buffer, response, [&](beast::error_code e3, size_t) { ec = e3; });
    });
  });
  io.run();
  if (ec) return Unavailable(where + ": " + ec.message());
  return HttpAnswer{static_cast<int>(response.result_int()), std::move(response.body())};
}

}  // namespace rankd
