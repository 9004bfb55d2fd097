#include "frontend/http_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "common/usable_cores.h"
#include "frontend/asio.h"
#include "frontend/beast_request.h"

namespace rankd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One event loop per I/O thread (options.io_threads, or half the cores, at least 2), each run by
// that thread alone.
std::vector<std::unique_ptr<asio::io_context>> MakeLoops(const HttpServerOptions& options) {
  const int threads = options.io_threads > 0 ? options.io_threads : std::max(2, UsableCores() / 2);
  std::vector<std::unique_ptr<asio::io_context>> loops;
  for (int i = 0; i < threads; ++i) loops.push_back(std::make_unique<asio::io_context>(1));
  return loops;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options),
        handler_(std::move(handler)),
        loops_(MakeLoops(options)),
        acceptor_(*loops_.front()),
        workers_work_(asio::make_work_guard(workers_)) {
    const int threads = options.worker_threads > 0 ? options.worker_threads : std::max(8, 2 * UsableCores());
    for (int i = 0; i < threads; ++i) {
      worker_threads_.emplace_back([this] {
        NameThisThread("rankd-httpwork");
        workers_.run();
      });
    }
  }

  Status Listen() {
    if (options_.tls) RANKD_RETURN_IF_ERROR(LoadCertificate());
    beast::error_code ec;
    auto address = asio::ip::make_address(options_.address, ec);
    if (ec) return InvalidArgument("bad listen address '" + options_.address + "'");
    tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Unavailable("cannot listen on " + options_.address + ":" + std::to_string(options_.port) + ": " +
                         ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (auto& loop : loops_) {
      work_.push_back(asio::make_work_guard(*loop));
      io_threads_.emplace_back([loop = loop.get()] {
        NameThisThread("rankd-http");
        loop->run();
      });
    }
    return Status::Ok();
  }

  void Stop(std::chrono::milliseconds drain) {
    Drain(drain);
    if (closed_.exchange(true)) return;
    workers_work_.reset();  // the workers finish what was handed to them, then end
    for (auto& t : worker_threads_) t.join();
    worker_threads_.clear();
    work_.clear();
    for (auto& loop : loops_) loop->stop();
    for (auto& t : io_threads_) t.join();
    io_threads_.clear();
  }

  void Drain(std::chrono::milliseconds drain) {
    if (stopped_.exchange(true)) return;
    asio::post(*loops_.front(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
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
  }

  ~Impl() {
    Stop(std::chrono::milliseconds(0));
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
  }

  int port() const { return port_; }

  template <class Stream>
  class Session;

 private:
  // The TLS context from the options' PEM files (TLS 1.2 and later).
  Status LoadCertificate() {
    ssl_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ssl_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    ssl_->use_certificate_chain_file(options_.tls->cert_file, ec);
    if (ec) return InvalidArgument("--http-server-cert '" + options_.tls->cert_file + "': " + ec.message());
    ssl_->use_private_key_file(options_.tls->key_file, asio::ssl::context::pem, ec);
    if (ec) return InvalidArgument("--http-server-key '" + options_.tls->key_file + "': " + ec.message());
    return Status::Ok();
  }
  void Accept();
  // Runs the handler; `respond` gets its answer once, or 500 when it throws first (logged).
  void Handle(const HttpRequest& request, HttpRespond respond);
  // Answers a connection 503 and closes it (over the connection cap, or out of descriptors).
  void RefuseSocket(tcp::socket& socket);
  // Out of descriptors: frees the one held in reserve to accept and refuse a waiting connection.
  void RefuseOneWithReserve();

  HttpServerOptions options_;
  HttpHandler handler_;
  // Each connection lives on one loop, its I/O thread's (round robin at accept): its reads and
  // writes complete on the thread that polled them. With one loop that all I/O threads ran, each
  // completion could wake another thread to run it: 10 (W2) and 22 (W1, whose 476 KB body arrives
  // in many reads) context switches of the I/O threads per request at light load on an H200 host.
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  size_t next_loop_ = 0;  // the accepting handler's (on the first loop)
  tcp::acceptor acceptor_;
  // The workers (named rankd-httpwork) run the handler of each request not handled at once.
  asio::io_context workers_;
  asio::executor_work_guard<asio::io_context::executor_type> workers_work_;
  std::vector<std::thread> worker_threads_;
  std::vector<std::thread> io_threads_;
  // Keep the I/O threads running while every session waits on a worker (no pending I/O).
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::atomic<int> inflight_{0};
  std::atomic<int64_t> last_read_ns_{0};  // steady-clock time of the last request read
  std::atomic<bool> stopped_{false};      // Drain began: nothing more is accepted
  std::atomic<bool> closed_{false};       // Stop's threads joined
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> refused_{0};           // connections answered 503 at accept
  asio::steady_timer retry_{*loops_.front()};  // the pause before accepting again after a failed accept
  int reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int port_ = 0;
  std::unique_ptr<asio::ssl::context> ssl_;  // with options_.tls
};

// A connection's requests, read and answered one at a time, over a TCP stream or a TLS one on it.
template <class Stream>
class HttpServer::Impl::Session : public std::enable_shared_from_this<Session<Stream>> {
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
  static constexpr size_t kBodyReadBytes = 64 * 1024;  // Beast's largest single read
  static constexpr size_t kIdleBufferBytes = 16 * 1024;

 public:
  template <class... TlsContext>
  Session(tcp::socket socket, Impl& server, TlsContext&... tls) : stream_(std::move(socket), tls...), server_(server) {
    ++server_.connections_;
  }

  // Reads the first request (after the TLS handshake, on a TLS stream: a client that does not
  // finish it in the header timeout is closed).
  void Start() {
    if constexpr (kTls) {
      Tcp().expires_after(server_.options_.header_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();
        self->Read();
      });
    } else {
      Read();
    }
  }
  ~Session() { --server_.connections_; }

  // Reads the next request's header; its body follows in ReadBody.
  void Read() {
    if (buffer_.capacity() > kIdleBufferBytes) buffer_.shrink_to_fit();  // an idle connection holds little
    access_ = {};
    access_.received = std::chrono::steady_clock::now();
    parser_.emplace();
    parser_->body_limit(server_.options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    Tcp().expires_after(server_.options_.header_timeout);  // idle or slow headers: the connection closes
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

 private:
  static bool Closed(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
           ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::error::broken_pipe;
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (Closed(ec)) return Close();
    if (ec) return Refuse(ec);
    const auto& header = parser_->get();
    auto length = parser_->content_length();
    if (length && *length > server_.options_.max_body_bytes) return Refuse(http::error::body_limit);
    Tcp().expires_after(server_.options_.body_timeout);
    if (beast::iequals(header[http::field::expect], "100-continue") && !parser_->is_done()) {
      // The client waits for this before it sends the body.
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  // Beast reads at most the buffer's free room a time (at least 512 bytes, at most 64 KiB), for a
  // Content-Length body and a chunked one alike. Left at a header's size, the buffer took a 1 MB
  // body in a thousand reads, each with its timer and executor work (11.8 ms of CPU on the I/O
  // thread, which capped W1 over HTTP at ~330 requests/s).
  void ReadBody() {
    if (std::optional<size_t> json = InPlaceJsonBytes()) return ReadJsonPart(*json);
    if (!parser_->is_done()) {  // a body follows: its length, or chunked (unknown)
      const uint64_t body = parser_->content_length().value_or(kBodyReadBytes);
      const size_t room = buffer_.size() + static_cast<size_t>(std::min<uint64_t>(body, kBodyReadBytes));
      if (buffer_.capacity() < room) buffer_.reserve(room);
    }
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  // A binary inference request's body is read into place (binary_pieces.h): a POST with a
  // Content-Length, no Content-Encoding and an Inference-Header-Content-Length short of it, whose
  // JSON part's length this returns. Any other body goes through Beast's parser whole.
  std::optional<size_t> InPlaceJsonBytes() const {
    const auto& header = parser_->get();
    const auto length = parser_->content_length();
    if (parser_->is_done() || !length || header.method() != http::verb::post) return std::nullopt;
    if (header.find(http::field::content_encoding) != header.end()) return std::nullopt;
    const auto json = header.find("Inference-Header-Content-Length");
    if (json == header.end()) return std::nullopt;
    return rankd::JsonPartBytes(std::string_view(json->value().data(), json->value().size()), *length);
  }

  // Moves up to `bytes` already read past the header (Beast reads ahead) to `to`; how many.
  size_t TakeBuffered(char* to, size_t bytes) {
    const size_t n = std::min(bytes, buffer_.size());
    if (n) std::memcpy(to, buffer_.data().data(), n);
    buffer_.consume(n);
    return n;
  }

  // Reads until `room_` (what a body still has to fill) is full, then calls `done` with the error,
  // if any. Each read takes all that the socket holds, into up to 64 of the buffers (Asio's limit
  // for one receive, with IOV_MAX seen: asio.h). Asio's async_read fills at most 16 a call
  // and takes at most 64 KiB: a W1 request's 476 KB in 53 tensors took 7.9 receives and 10.4 epoll
  // waits so, 4.2 and 6.6 here (docs/log/benchmarks.md, "HTTP bodies read in fewer calls").
  template <class Done>
  void FillRoom(Done done) {
    while (room_at_ < room_.size() && room_[room_at_].size() == 0) ++room_at_;
    if (room_at_ == room_.size()) return done(beast::error_code());
    stream_.async_read_some(std::span<asio::mutable_buffer>(room_).subspan(room_at_),
                            [self = shared_from_this(), done](beast::error_code ec, size_t n) mutable {
                              if (ec) return done(ec);
                              for (; n > 0 && self->room_at_ < self->room_.size(); ++self->room_at_) {
                                asio::mutable_buffer& b = self->room_[self->room_at_];
                                if (n < b.size()) {
                                  b += n;
                                  break;
                                }
                                n -= b.size();
                              }
                              self->FillRoom(std::move(done));
                            });
  }

  void ReadJsonPart(size_t json_bytes) {
    json_part_.resize(json_bytes);
    const size_t have = TakeBuffered(json_part_.data(), json_bytes);
    const size_t binary_bytes = static_cast<size_t>(*parser_->content_length()) - json_bytes;
    room_.assign(1, asio::buffer(json_part_.data() + have, json_bytes - have));
    room_at_ = 0;
    FillRoom([self = shared_from_this(), binary_bytes](beast::error_code ec) {
      if (Closed(ec)) return self->Close();
      if (ec) return self->Refuse(ec);
      self->ReadBinaryPart(binary_bytes);
    });
  }

  // Each input's bytes the JSON part announces into a piece of their own, then whatever follows.
  void ReadBinaryPart(size_t bytes) {
    binary_part_ = LayOutBinary(AnnouncedBinarySizes(json_part_), bytes);
    room_.clear();
    room_at_ = 0;
    for (const BinaryPieces::Piece& piece : binary_part_.pieces) {
      const size_t have = TakeBuffered(piece.data, piece.bytes);
      if (have < piece.bytes) room_.emplace_back(piece.data + have, piece.bytes - have);
    }
    FillRoom([self = shared_from_this()](beast::error_code ec) {
      self->room_.clear();
      if (Closed(ec)) return self->Close();
      if (ec) return self->Refuse(ec);
      auto req = self->parser_->release();  // the header; the body went around the parser
      self->keep_alive_ = req.keep_alive();
      HttpRequest request = ToHttpRequest(std::move(req));
      request.body = std::move(self->json_part_);
      request.binary = std::move(self->binary_part_);
      self->json_part_ = std::string();
      self->binary_part_ = BinaryPieces();
      self->Dispatch(std::move(request));
    });
  }

  // Answers a request that could not be read, and closes the connection (its framing is lost).
  void Refuse(beast::error_code ec) {
    HttpResponse r;
    if (ec == http::error::body_limit) {
      r.status = 413;
      r.body = "{\"error\":\"request body too large\"}";
    } else if (ec == http::error::header_limit) {
      r.status = 431;
      r.body = "{\"error\":\"request header fields too large\"}";
    } else {
      r.status = 400;
      r.body = "{\"error\":\"malformed HTTP request: " + ec.message() + "\"}";
    }
    Write(std::move(r), false);
  }

  void OnRead(beast::error_code ec, size_t) {
    if (Closed(ec)) return Close();
    if (ec) return Refuse(ec);
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    Dispatch(ToHttpRequest(std::move(req)));
  }

  // Hands a request read whole to a worker (or handles it here, where options.handle_at_once
  // says so), or answers 503 past the cap on requests in flight.
  void Dispatch(HttpRequest request) {
    Tcp().expires_never();  // the handler's time is not the client's; Read() sets the next deadline
    request.received = std::chrono::steady_clock::now();
    if (LogAccessOn())
      access_ = {request.method, request.target, request.body.size() + request.binary.size(), request.received};
    server_.last_read_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(request.received.time_since_epoch()).count();
    if (server_.inflight_.fetch_add(1) >= server_.options_.max_inflight) {
      server_.inflight_.fetch_sub(1);
      HttpResponse r;
      r.status = 503;
      r.body = "{\"error\":\"the server is overloaded; retry later\"}";
      Write(std::move(r), keep_alive_);
      return;
    }
    auto self = shared_from_this();
    auto respond = [self](HttpResponse response) { self->Answer(std::move(response)); };
    if (server_.options_.handle_at_once && server_.options_.handle_at_once(request)) {
      request.on_io_thread = true;
      server_.Handle(request, std::move(respond));
      return;
    }
    asio::post(server_.workers_, [self, request = std::move(request), respond = std::move(respond)]() mutable {
      self->server_.Handle(request, std::move(respond));
    });
  }

  // The handler's answer, on whichever thread gives it (a batcher's executor, the device's
  // poller, a worker). Over plain TCP it is sent from that thread when the socket takes it whole
  // at once (one sendmsg that does not block), and the next request's read is armed from there:
  // the I/O thread is not woken to write it, only when the next request's bytes arrive. Nothing
  // else touches the session meanwhile: its I/O thread left it when it handed the request on (no
  // read, write or timer of it pending), and Asio's reactor and timers take operations from any
  // thread. Over TLS, with the server stopping, or where the socket takes the answer in part or
  // not at all, the I/O thread writes (the rest of) it.
  void Answer(HttpResponse r) {
    if constexpr (!kTls) {
      if (!server_.stopped_.load() && SendAtOnce(r)) return;
    }
    asio::post(stream_.get_executor(), [self = shared_from_this(), r = std::move(r)]() mutable {
      self->server_.inflight_.fetch_sub(1);
      self->Write(std::move(r), self->keep_alive_);
    });
  }

  // An answer's bytes: the head (Head) and the body.
  struct Wire {
    std::string head, body;
  };

  // Sends `r` as Write would, without blocking; false where nothing was sent. Once some of it
  // is sent the answer is this call's: the rest, if any, goes through the I/O thread.
  bool SendAtOnce(HttpResponse& r) {
    std::string head = Head(r, keep_alive_);
    iovec parts[2] = {{head.data(), head.size()}, {r.body.data(), r.body.size()}};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = r.body.empty() ? 1 : 2;
    const ssize_t sent = ::sendmsg(Tcp().socket().native_handle(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent <= 0) return false;  // the socket's buffer full, or the connection gone: Write finds out
    server_.inflight_.fetch_sub(1);
    if (LogAccessOn()) LogAccessLine(r.status, r.body.size());
    if (static_cast<size_t>(sent) == head.size() + r.body.size()) {
      if (keep_alive_) {
        Read();
      } else {
        Close();
      }
      return true;
    }
    auto wire = std::make_shared<Wire>(Wire{std::move(head), std::move(r.body)});
    asio::post(stream_.get_executor(), [self = shared_from_this(), wire, sent] {
      self->WriteWire(wire, static_cast<size_t>(sent), self->keep_alive_);
    });
    return true;
  }

  // What an answer sends before its body: the status line, Server, Content-Type, the answer's
  // own headers, Content-Length and, where the connection ends with it, Connection: close.
  static std::string Head(const HttpResponse& r, bool keep_alive) {
    const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(r.status));
    std::string head = "HTTP/1.1 " + std::to_string(r.status) + " ";
    head.append(reason.data(), reason.size());
    head += "\r\nServer: rankd\r\nContent-Type: " + r.content_type + "\r\n";
    for (const auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
    head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    if (!keep_alive) head += "Connection: close\r\n";
    head += "\r\n";
    return head;
  }

  // Writes an answer on the I/O thread (the connection ends with it when the server stops).
  void Write(HttpResponse r, bool keep_alive) {
    keep_alive = keep_alive && !server_.stopped_.load();
    if (LogAccessOn()) LogAccessLine(r.status, r.body.size());
    std::string head = Head(r, keep_alive);
    WriteWire(std::make_shared<Wire>(Wire{std::move(head), std::move(r.body)}), 0, keep_alive);
  }

  // Writes `wire` from its byte `from` on, then reads the next request or closes.
  void WriteWire(std::shared_ptr<Wire> wire, size_t from, bool keep_alive) {
    Tcp().expires_after(server_.options_.body_timeout);  // a client that does not read its answer
    const size_t in_head = std::min(from, wire->head.size());
    const std::array<asio::const_buffer, 2> parts{asio::buffer(wire->head) + in_head,
                                                  asio::buffer(wire->body) + (from - in_head)};
    asio::async_write(stream_, parts, [self = shared_from_this(), wire, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) return self->Close();
      self->Read();
    });
  }

  // The access log's line: the peer, the request line (a request that could not be read has "-"),
  // the status, the bytes in (body) and out (body), and the time from its arrival to its answer.
  void LogAccessLine(int status, size_t bytes_out) {
    beast::error_code ec;
    auto peer = Tcp().socket().remote_endpoint(ec);
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - access_.received)
            .count();
    LogAccess("http " + (ec ? std::string("-") : peer.address().to_string() + ":" + std::to_string(peer.port())) +
              " \"" + (access_.method.empty() ? "-" : access_.method + " " + access_.target) + "\" " +
              std::to_string(status) + " " + std::to_string(access_.bytes_in) + " " + std::to_string(bytes_out) + " " +
              std::to_string(us) + "us");
  }

  void Close() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  Stream stream_;
  Impl& server_;
  beast::flat_buffer buffer_;
  std::vector<asio::mutable_buffer> room_;  // what the body being read still has to fill (FillRoom)
  size_t room_at_ = 0;                      // room_'s first buffer not yet full
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string json_part_;     // a body read into place: its JSON part,
  BinaryPieces binary_part_;  // and its binary part
  bool keep_alive_ = false;
  struct Access {
    std::string method, target;
    size_t bytes_in = 0;
    std::chrono::steady_clock::time_point received;
  } access_;  // the request being answered, for the access log
};

void HttpServer::Impl::Handle(const HttpRequest& request, HttpRespond respond) {
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto once = [answered, respond = std::move(respond)](HttpResponse response) {
    if (!answered->exchange(true)) respond(std::move(response));
  };
  try {
    handler_(request, once);
    return;
  } catch (const std::exception& e) {
    LogError("http: " + request.method + " " + std::to_string(request.target.size()) +
             "-byte target: the handler failed: " + e.what());
  } catch (...) {
    LogError("http: " + request.method + " " + std::to_string(request.target.size()) +
             "-byte target: the handler failed");
  }
  HttpResponse r;
  r.status = 500;
  r.body = "{\"error\":\"internal error while handling the request (logged by the server)\"}";
  once(std::move(r));
}

void HttpServer::Impl::Accept() {
  asio::io_context& loop = *loops_[next_loop_++ % loops_.size()];
  acceptor_.async_accept(loop, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors (or another failure): refuse the waiting connection through the
      // descriptor kept in reserve, then wait a moment instead of retrying at once (which spins).
      if (ec == asio::error::no_descriptors || ec.value() == ENFILE) RefuseOneWithReserve();
      retry_.expires_after(std::chrono::milliseconds(20));
      retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    if (connections_.load() >= options_.max_connections) {
      RefuseSocket(socket);
    } else {
      if (ssl_) {
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(std::move(socket), *this, *ssl_)->Start();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(std::move(socket), *this)->Start();
      }
    }
    Accept();
  });
}

void HttpServer::Impl::RefuseSocket(tcp::socket& socket) {
  static constexpr char kRefusal[] =
      "HTTP/1.1 503 Service Unavailable\r\nServer: rankd\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: 45\r\n\r\n{\"error\":\"too many connections; retry later\"}";
  static_assert(sizeof(kRefusal) - 1 - std::string_view(kRefusal).find("\r\n\r\n") - 4 == 45);
  beast::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(asio::buffer(kRefusal, sizeof(kRefusal) - 1), ec);  // best effort: a fresh socket has room
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  refused_.fetch_add(1);
}

void HttpServer::Impl::RefuseOneWithReserve() {
  // Another thread may have taken the descriptor freed last time before it was reopened: try again,
  // so that a transient use elsewhere does not end the refusals for good.
  if (reserve_fd_ < 0) reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (reserve_fd_ < 0) return;
  ::close(reserve_fd_);
  reserve_fd_ = -1;
  beast::error_code ec;
  acceptor_.non_blocking(true, ec);
  tcp::socket socket(*loops_.front());
  acceptor_.accept(socket, ec);
  if (!ec) RefuseSocket(socket);
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Drain(std::chrono::milliseconds drain) { impl_->Drain(drain); }

void HttpServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  RANKD_RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace rankd
