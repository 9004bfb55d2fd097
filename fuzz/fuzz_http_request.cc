// libFuzzer target: arbitrary bytes as HTTP/1.1 requests on one connection, read with Boost.Beast's
// parser under the server's limits (fed in pieces the first byte sizes, as a socket delivers them)
// and each complete request handed to the REST routes over a repository serving the zoo's MMoE:
// framing, header values, targets, the binary-data split and the KServe parser together; a binary
// body is also handed on as the server reads it into place (binary_pieces.h), and must be answered
// the same.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>

#include "frontend/beast_request.h"
#include "frontend/http_api.h"
#include "serving/metrics.h"

namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;

rankd::HttpApi* Api() {
  static rankd::HttpApi* api = [] {
    fs::path root = fs::temp_directory_path() / ("rankd_fuzz_http_" + std::to_string(::getpid()));
    fs::create_directories(root);
    std::error_code ec;
    fs::create_directory_symlink(fs::absolute("models/zoo/mmoe"), root / "mmoe", ec);
    rankd::RepositoryOptions options;
    options.root = root.string();
    auto repo = rankd::ModelRepository::Create(options);
    if (!repo.ok()) return static_cast<rankd::HttpApi*>(nullptr);
    auto* service = new rankd::InferService(*repo->release(), *new rankd::Metrics());
    // The log settings and shared memory calls stay out of reach: a fuzzed body naming a log file
    // or a shared memory object would write outside the test.
    rankd::RestrictedApis restricted;
    if (!restricted.Add("logging,shared-memory:rankd-fuzz-key=" + std::to_string(::getpid()) + "-unguessable").ok()) {
      return static_cast<rankd::HttpApi*>(nullptr);
    }
    return new rankd::HttpApi(*service, rankd::JsonLimits{}, rankd::HealthProbes{}, *new rankd::SharedMemoryRegions(),
                              std::move(restricted));
  }();
  return api;
}

rankd::HttpResponse Answer(rankd::HttpApi& api, const rankd::HttpRequest& request) {
  std::promise<rankd::HttpResponse> answer;
  api.Handle(request, [&answer](rankd::HttpResponse r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

// `request` as the server hands on a binary inference request it read into place (http_server.cc):
// a POST without Content-Encoding whose Inference-Header-Content-Length is short of its body.
std::optional<rankd::HttpRequest> ReadIntoPlace(const rankd::HttpRequest& request) {
  auto json = request.headers.find("inference-header-content-length");
  if (request.method != "POST" || request.headers.count("content-encoding") || json == request.headers.end())
    return std::nullopt;
  const std::optional<size_t> bytes = rankd::JsonPartBytes(json->second, request.body.size());
  if (!bytes) return std::nullopt;
  rankd::HttpRequest placed = request;
  placed.body = request.body.substr(0, *bytes);
  placed.binary = rankd::PlaceBinary(placed.body, std::string_view(request.body).substr(*bytes));
  return placed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  HttpApi* api = Api();
  if (!api) __builtin_trap();  // run from the repository root
  if (size == 0) return 0;
  size_t piece = 1 + data[0] % 64;
  const char* p = reinterpret_cast<const char*>(data) + 1;
  const char* end = reinterpret_cast<const char*>(data) + size;
  std::string pending;
  while (p < end || !pending.empty()) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 * 1024);
    parser.body_limit(1 << 20);
    boost::beast::error_code ec;
    while (!parser.is_done()) {
      size_t take = std::min<size_t>(piece, static_cast<size_t>(end - p));
      pending.append(p, take);
      p += take;
      size_t used = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (ec == http::error::need_more || (!ec && used == 0)) {
        if (p == end) return 0;  // the connection ends mid-request
        ec = {};
        continue;
      }
      if (ec) return 0;  // the server answers 400 or 413 and closes
    }
    HttpRequest request = ToHttpRequest(parser.release());
    HttpResponse response = Answer(*api, request);
    if (response.status < 200 || response.status > 599) __builtin_trap();
    // A binary body as the server reads it into place answers the same, byte for byte.
    if (std::optional<HttpRequest> placed = ReadIntoPlace(request)) {
      HttpResponse again = Answer(*api, *placed);
      if (again.status != response.status || again.body != response.body) __builtin_trap();
    }
  }
  return 0;
}
