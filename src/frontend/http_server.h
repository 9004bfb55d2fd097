// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast) with keep-alive.
//
// A few I/O threads own the sockets; each complete request is handed to a worker pool, so slow
// handlers never block I/O, and the handler answers it through a callback, so a request waiting
// for its batch holds no thread. Requests over `max_body_bytes` get 413 (before their body is read),
// malformed ones 400; when `max_inflight` requests are already being handled the next one is
// refused at once with 503. `Expect: 100-continue` is answered, chunked bodies and pipelined
// requests are read. A handler that throws answers 500 and the server lives on.
//
// Resources are bounded: at most `max_connections` connections (more, or a process out of file
// descriptors, are answered 503 and closed rather than retried in a loop), a connection's request
// header must arrive within `header_timeout` of its previous answer (an idle keep-alive connection
// closes then) and its body within `body_timeout`.
// Drain() stops accepting and lets requests in flight finish (up to a deadline); Stop() closes.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/binary_pieces.h"
#include "rankd/status.h"

namespace rankd {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // path and query
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // A binary inference request read into place (http_server.cc, binary_pieces.h): `body` holds
  // its JSON part (the Inference-Header-Content-Length bytes) and this the rest. Else empty.
  BinaryPieces binary;
  std::chrono::steady_clock::time_point received;  // when the request was fully read
  // Handled on the I/O thread that read it (HttpServerOptions::handle_at_once): the handler must
  // not block or run long work on this thread.
  bool on_io_thread = false;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// A handler answers each request once through its HttpRespond, before returning or later from any
// thread; the request is valid only until the handler returns.
using HttpRespond = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(const HttpRequest&, HttpRespond)>;

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  int port = 8000;  // 0 picks a free port (see HttpServer::port)
  // Threads that read requests off their sockets and write the answers. 0: half the cores,
  // at least 2.
  int io_threads = 0;
  // Threads that run the handler (parse, and score when the model does not batch). 0: twice the
  // cores, at least 8.
  int worker_threads = 0;
  uint64_t max_body_bytes = uint64_t{64} << 20;
  int max_inflight = 1024;
  int max_connections = 4096;
  std::chrono::milliseconds header_timeout{30000};
  std::chrono::milliseconds body_timeout{60000};
  // HTTPS: the server's PEM certificate chain and private key (TLS 1.2 and later; no client
  // certificates). Absent: plain HTTP.
  struct Tls {
    std::string cert_file, key_file;
  };
  std::optional<Tls> tls;
  // A request this accepts is handled on the I/O thread that read it, `on_io_thread` set, rather
  // than handed to a worker: for requests whose handler only queues work and returns (an
  // inference for a model that batches), where the worker's wake-up and sleep would cost more
  // than the handling. Called on the I/O thread; must be cheap and thread-safe.
  std::function<bool(const HttpRequest&)> handle_at_once;
};

class HttpServer {
 public:
  // Binds and starts serving; `handler` runs on the worker pool and must be thread-safe.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);
  ~HttpServer();
  int port() const;
  // Stops accepting and waits up to `drain` for requests in flight; connections stay open and
  // answers that come later are still written, until Stop.
  void Drain(std::chrono::milliseconds drain);
  // Drain (where not done yet), then closes every connection and joins the server's threads. An
  // answer that comes later is not written; the handler's owner must see that none comes once
  // the server is destroyed.
  void Stop(std::chrono::milliseconds drain);

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankd
