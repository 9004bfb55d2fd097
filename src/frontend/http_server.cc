#include "frontend/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

namespace rankd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options),
        handler_(std::move(handler)),
        acceptor_(io_),
        workers_(static_cast<size_t>(options.worker_threads > 0 ? options.worker_threads
                                                                  : std::max(8u, 2 * std::thread::hardware_concurrency()))) {}

  Status Listen() {
    beast::error_code ec;
    auto address = asio::ip::make_address(options_.address, ec);
    if (ec) return InvalidArgument("bad listen address '" + options_.address + "'");
    tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Unavailable("cannot listen on " + options_.address + ":" + std::to_string(options_.port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (int i = 0; i < std::max(1, options_.io_threads); ++i) io_threads_.emplace_back([this] { io_.run(); });
    return Status::Ok();
  }

  void Stop(std::chrono::milliseconds drain) {
    if (stopped_.exchange(true)) return;
    asio::post(io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    // Drain: requests being handled finish, and requests already on open connections are read
    // and answered, until nothing has arrived for a short grace period (or the deadline passes).
    auto deadline = std::chrono::steady_clock::now() + drain;
    auto quiet = [this] {
      auto since = std::chrono::steady_clock::now().time_since_epoch() - std::chrono::nanoseconds(last_read_ns_.load());
      return since > std::chrono::milliseconds(200);
    };
    while ((inflight_.load() > 0 || !quiet()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    workers_.join();
    work_.reset();
    io_.stop();
    for (auto& t : io_threads_) t.join();
    io_threads_.clear();
  }

  ~Impl() { Stop(std::chrono::milliseconds(0)); }

  int port() const { return port_; }

  class Session;

 private:
  void Accept();

  HttpServerOptions options_;
  HttpHandler handler_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::thread_pool workers_;
  std::vector<std::thread> io_threads_;
  // Keeps the I/O threads running while every session waits on a worker (no pending I/O).
  asio::executor_work_guard<asio::io_context::executor_type> work_{asio::make_work_guard(io_)};
  std::atomic<int> inflight_{0};
  std::atomic<int64_t> last_read_ns_{0};  // steady-clock time of the last request read
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

class HttpServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Impl& server) : stream_(std::move(socket)), server_(server) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(server_.options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(300));  // idle keep-alive connections close
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

 private:
  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      Close();
      return;
    }
    if (ec) {
      HttpResponse r;
      r.status = ec == http::error::body_limit ? 413 : 400;
      r.body = "{\"error\":\"" + std::string(ec == http::error::body_limit ? "request body too large" : "malformed HTTP request") + "\"}";
      Write(std::move(r), false);
      return;
    }
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    request.body = std::move(req.body());
    request.received = std::chrono::steady_clock::now();
    server_.last_read_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(request.received.time_since_epoch()).count();
    if (server_.inflight_.fetch_add(1) >= server_.options_.max_inflight) {
      server_.inflight_.fetch_sub(1);
      HttpResponse r;
      r.status = 503;
      r.body = "{\"error\":\"the server is overloaded; retry later\"}";
      Write(std::move(r), keep_alive_);
      return;
    }
    auto self = shared_from_this();
    asio::post(server_.workers_, [self, request = std::move(request)]() mutable {
      HttpResponse response = self->server_.handler_(request);
      asio::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->server_.inflight_.fetch_sub(1);
        self->Write(std::move(response), self->keep_alive_);
      });
    });
  }

  void Write(HttpResponse r, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "rankd");
    res->set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res->set(k, v);
    res->keep_alive(keep_alive && !server_.stopped_.load());
    res->body() = std::move(r.body);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !res->keep_alive()) {
        self->Close();
        return;
      }
      self->Read();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
};

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    } else {
      std::make_shared<Session>(std::move(socket), *this)->Read();
    }
    Accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace rankd
