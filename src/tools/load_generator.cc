#include "tools/load_generator.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <random>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

namespace rankd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class LoadRun {
 public:
  explicit LoadRun(const LoadOptions& options) : o_(options), timer_(io_) {}

  StatusOr<LoadResult> Run() {
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
    // The schedule: exponential gaps at the offered rate, from the seed.
    std::mt19937_64 rng(o_.seed);
    std::exponential_distribution<double> gap(o_.rate);
    start_ = Clock::now() + std::chrono::milliseconds(20);
    measure_from_ = start_ + Seconds(o_.warmup_seconds);
    measure_to_ = measure_from_ + Seconds(o_.seconds);
    for (double t = gap(rng); t < o_.warmup_seconds + o_.seconds; t += gap(rng)) arrivals_.push_back(start_ + Seconds(t));
    Arm();
    io_.run();
    return Summarise();
  }

 private:
  struct Conn {
    explicit Conn(asio::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
    bool busy = false;
    bool dead = false;  // could not reconnect: out of use
    Clock::time_point scheduled;
  };

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
    c.request.body() = body.bytes;
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
    Clock::time_point now = Clock::now();
    bool counted = c.scheduled >= measure_from_ && c.scheduled < measure_to_;
    if (counted) {
      if (ec == beast::error::timeout) {
        ++result_.timeouts;
      } else if (ec) {
        ++result_.errors;
      } else {
        ++result_.statuses[static_cast<int>(c.response.result_int())];
        if (c.response.result() == http::status::ok) {
          ++result_.ok;
          latencies_ms_.push_back(std::chrono::duration<double, std::milli>(now - c.scheduled).count());
          last_answer_ = std::max(last_answer_, now);
        } else {
          ++result_.errors;
        }
      }
      ++result_.sent;
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
      result_.errors += static_cast<int64_t>(pending_.size() + arrivals_.size() - next_);
      pending_.clear();
      next_ = arrivals_.size();
    }
    if (next_ >= arrivals_.size() && pending_.empty() && idle) {
      timer_.cancel();
      io_.stop();
    }
  }

  LoadResult Summarise() {
    LoadResult r = result_;
    r.offered_rate = o_.rate;
    // Answers over the span from the first counted arrival to the last counted answer: a server
    // that falls behind answers late and its rate drops below the offered one.
    double span = std::max(o_.seconds, std::chrono::duration<double>(last_answer_ - measure_from_).count());
    r.achieved_rate = static_cast<double>(r.ok) / span;
    std::vector<double>& v = latencies_ms_;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) { return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]; };
    r.p50_ms = q(0.5);
    r.p90_ms = q(0.9);
    r.p99_ms = q(0.99);
    r.p999_ms = q(0.999);
    r.max_ms = v.empty() ? 0.0 : v.back();
    double sum = 0;
    for (double x : v) sum += x;
    r.mean_ms = v.empty() ? 0.0 : sum / static_cast<double>(v.size());
    return r;
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
  Clock::time_point start_, measure_from_, measure_to_, last_answer_;
  LoadResult result_;
  std::vector<double> latencies_ms_;
};

}  // namespace

StatusOr<LoadResult> RunOpenLoop(const LoadOptions& options) {
  if (options.bodies.empty()) return InvalidArgument("no request bodies");
  if (!(options.rate > 0)) return InvalidArgument("the rate must be positive");
  LoadRun run(options);
  return run.Run();
}

}  // namespace rankd
