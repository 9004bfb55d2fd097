#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "frontend/asio.h"
#include "tools/load_generator.h"

namespace rankd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class HttpLoadRun {
 public:
  explicit HttpLoadRun(const LoadOptions& options) : o_(options), timer_(io_), recorder_(options.seconds) {}

  // Opens the connections.
  Status Connect() {
    beast::error_code ec;
    endpoint_ = tcp::endpoint(asio::ip::make_address(o_.host, ec), static_cast<unsigned short>(o_.port));
    if (ec) {
      auto resolved = tcp::resolver(io_).resolve(o_.host, std::to_string(o_.port), ec);
      if (ec || resolved.empty()) return Unavailable("cannot resolve '" + o_.host + "': " + ec.message());
      endpoint_ = *resolved.begin();
    }
    for (int i = 0; i < std::max(1, o_.connections); ++i) {
      auto c = std::make_unique<Conn>(io_);
      c->stream.connect(endpoint_, ec);
      if (ec) return Unavailable("cannot connect to " + o_.host + ":" + std::to_string(o_.port) + ": " + ec.message());
      c->stream.socket().set_option(tcp::no_delay(true));
      conns_.push_back(std::move(c));
    }
    return Status::Ok();
  }

  // Sends this run's arrivals, scheduled from `start`, until every one is answered.
  void Run(Clock::time_point start) {
    measure_from_ = start + Seconds(o_.warmup_seconds);
    arrivals_ = PoissonArrivals(o_, start);
    Arm();
    io_.run();
  }
  const LoadRecorder& recorder() const { return recorder_; }

 private:
  struct Conn {
    explicit Conn(asio::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::span_body<const char>> request;  // views the body in LoadOptions: no copy per send
    http::response<http::string_body> response;
    bool busy = false;
    bool dead = false;  // could not reconnect: out of use
    Clock::time_point scheduled;
  };

  static double SecondsAfter(Clock::time_point from, Clock::time_point t) {
    return std::chrono::duration<double>(t - from).count();
  }

  static Clock::duration Seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  // Moves due arrivals into the queue, sends what idle connections can take, waits for the next.
  void Arm() {
    Clock::time_point now = Clock::now();
    while (next_ < arrivals_.size() && arrivals_[next_] <= now) pending_.push_back(arrivals_[next_++]);
    Pump();
    if (next_ < arrivals_.size()) {
      timer_.expires_at(arrivals_[next_]);
      timer_.async_wait([this](beast::error_code ec) {
        if (!ec) Arm();
      });
    }
  }

  void Pump() {
    for (auto& c : conns_) {
      if (pending_.empty()) return;
      if (c->busy || c->dead) continue;
      Send(*c, pending_.front());
      pending_.pop_front();
    }
  }

  void Send(Conn& c, Clock::time_point scheduled) {
    c.busy = true;
    c.scheduled = scheduled;
    c.request = {http::verb::post, o_.target, 11};
    c.request.set(http::field::host, o_.host);
    c.request.set(http::field::content_type, "application/json");
    c.request.keep_alive(true);
    const LoadOptions::Body& body = o_.bodies[sent_++ % o_.bodies.size()];
    c.request.body() = {body.bytes.data(), body.bytes.size()};
    if (body.json_length > 0) c.request.set("Inference-Header-Content-Length", std::to_string(body.json_length));
    c.request.prepare_payload();
    c.response = {};
    c.stream.expires_after(Seconds(o_.timeout_seconds));
    http::async_write(c.stream, c.request, [this, &c](beast::error_code ec, size_t) {
      if (ec) return Done(c, ec);
      http::async_read(c.stream, c.buffer, c.response, [this, &c](beast::error_code ec2, size_t) { Done(c, ec2); });
    });
  }

  void Done(Conn& c, beast::error_code ec) {
    double arrival_s = SecondsAfter(measure_from_, c.scheduled);
    if (ec == beast::error::timeout) {
      recorder_.Timeout(arrival_s);
    } else if (ec) {
      recorder_.Error(arrival_s);
    } else {
      recorder_.Answer(arrival_s, SecondsAfter(measure_from_, Clock::now()), static_cast<int>(c.response.result_int()),
                       c.response.result() == http::status::ok);
    }
    if (ec || !c.response.keep_alive()) {  // start afresh on a new connection
      beast::error_code ignored;
      c.stream.socket().close(ignored);
      c.buffer.clear();
      c.stream.expires_after(Seconds(o_.timeout_seconds));
      c.stream.async_connect(endpoint_, [this, &c](beast::error_code connect_error) {
        if (!connect_error) c.stream.socket().set_option(tcp::no_delay(true));
        Finish(c, !connect_error);
      });
      return;
    }
    Finish(c, true);
  }

  void Finish(Conn& c, bool usable) {
    c.busy = false;
    c.dead = !usable;
    if (usable && !pending_.empty()) {
      Clock::time_point t = pending_.front();
      pending_.pop_front();
      Send(c, t);
    }
    bool idle = std::none_of(conns_.begin(), conns_.end(), [](const auto& x) { return x->busy; });
    bool all_dead = std::all_of(conns_.begin(), conns_.end(), [](const auto& x) { return x->dead; });
    if (all_dead) {  // nothing can be sent any more: what is left counts as errors
      recorder_.Unsent(static_cast<int64_t>(pending_.size() + arrivals_.size() - next_));
      pending_.clear();
      next_ = arrivals_.size();
    }
    if (next_ >= arrivals_.size() && pending_.empty() && idle) {
      timer_.cancel();
      io_.stop();
    }
  }

  const LoadOptions& o_;
  asio::io_context io_;
  asio::steady_timer timer_;
  tcp::endpoint endpoint_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Clock::time_point> arrivals_;
  size_t next_ = 0;
  std::deque<Clock::time_point> pending_;
  size_t sent_ = 0;
  Clock::time_point measure_from_;
  LoadRecorder recorder_;
};

}  // namespace

StatusOr<LoadResult> RunHttpLoad(const LoadOptions& options) {
  // `threads` runs, each on its own thread with its share of the connections and of the rate (an
  // independent Poisson stream of its own seed: their sum is Poisson at the full rate).
  const int n = std::clamp(options.threads, 1, std::max(1, options.connections));
  std::vector<LoadOptions> shares;
  for (int k = 0; k < n; ++k) shares.push_back(ShareOf(options, k, n));
  std::vector<std::unique_ptr<HttpLoadRun>> runs;
  for (const LoadOptions& o : shares) {
    runs.push_back(std::make_unique<HttpLoadRun>(o));
    RANKD_RETURN_IF_ERROR(runs.back()->Connect());
  }
  Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  std::vector<std::thread> threads;
  for (auto& run : runs) threads.emplace_back([&run, start] { run->Run(start); });
  for (std::thread& t : threads) t.join();
  LoadRecorder all(options.seconds);
  for (const auto& run : runs) all.Merge(run->recorder());
  return all.Summarise(options.rate);
}

}  // namespace rankd
