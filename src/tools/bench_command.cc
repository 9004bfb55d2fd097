// `rankd bench server`: open-loop load at one or more rates against a running server
// (load_generator.h), a line per rate on stderr, and the results with the exact command line as
// JSON (and CSV). With --p99-target-ms it reports the highest rate whose p99 stayed under it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tools/commands.h"
#include "tools/load_generator.h"

namespace rankd {
namespace {

using nlohmann::json;

// True when some number under an input's "data" is not zero (timing all-zero inputs measures a
// cache-resident toy, not the model).
bool HasNonZeroData(const json& j) {
  if (j.is_number()) return j.get<double>() != 0.0;
  if (j.is_array()) {
    for (const json& e : j) {
      if (HasNonZeroData(e)) return true;
    }
  }
  return false;
}

// Flattens nested lists of numbers in order.
void Flatten(const json& j, std::vector<double>& out) {
  if (j.is_array()) {
    for (const json& e : j) Flatten(e, out);
  } else {
    out.push_back(j.get<double>());
  }
}

// The same request in KServe's binary tensor extension: each input's "data" moves, as
// little-endian bytes, behind the JSON, so the server does not parse numbers from text.
StatusOr<LoadOptions::Body> ToBinary(json j) {
  std::string tensors;
  for (json& input : j["inputs"]) {
    if (!input.contains("data")) continue;
    std::vector<double> values;
    Flatten(input["data"], values);
    std::string dtype = input.value("datatype", "");
    auto append = [&](auto tag) {
      for (double v : values) {
        decltype(tag) x = static_cast<decltype(tag)>(v);
        tensors.append(reinterpret_cast<const char*>(&x), sizeof x);
      }
      return values.size() * sizeof tag;
    };
    size_t bytes = dtype == "FP32" ? append(float{}) : dtype == "FP64" ? append(double{})
                   : dtype == "INT64" ? append(int64_t{}) : dtype == "INT32" ? append(int32_t{}) : 0;
    if (bytes == 0 && !values.empty()) return InvalidArgument("--binary: datatype '" + dtype + "' is not supported");
    if (input.contains("shape") && input["shape"].is_array()) {  // a -1 is what the values leave
      int64_t known = 1;
      for (const json& d : input["shape"]) known *= d.get<int64_t>() < 0 ? 1 : d.get<int64_t>();
      for (json& d : input["shape"]) {
        if (d.get<int64_t>() < 0) d = known == 0 ? 0 : static_cast<int64_t>(values.size()) / known;
      }
    }
    input.erase("data");
    input["parameters"]["binary_data_size"] = bytes;
  }
  LoadOptions::Body body;
  body.bytes = j.dump();
  body.json_length = body.bytes.size();
  body.bytes += tensors;
  return body;
}

StatusOr<std::vector<LoadOptions::Body>> ReadBodies(const std::string& path, bool binary) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read '" + path + "'");
  std::vector<LoadOptions::Body> bodies;
  bool nonzero = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("inputs")) {
      return InvalidArgument(path + ": line " + std::to_string(bodies.size() + 1) + " is not a KServe request body");
    }
    for (const json& input : j["inputs"]) nonzero = nonzero || (input.contains("data") && HasNonZeroData(input["data"]));
    if (binary) {
      ASSIGN_OR_RETURN(LoadOptions::Body body, ToBinary(std::move(j)));
      bodies.push_back(std::move(body));
    } else {
      bodies.push_back({line, 0});
    }
  }
  if (bodies.empty()) return InvalidArgument(path + " holds no requests");
  if (!nonzero) return InvalidArgument(path + ": every input is all zeros; refusing to time it");
  return bodies;
}

json ToJson(const LoadResult& r) {
  json statuses = json::object();
  for (const auto& [code, count] : r.statuses) statuses[std::to_string(code)] = count;
  return {{"offered_rate", r.offered_rate}, {"achieved_rate", r.achieved_rate}, {"sent", r.sent}, {"ok", r.ok},
          {"errors", r.errors}, {"timeouts", r.timeouts}, {"statuses", statuses}, {"p50_ms", r.p50_ms},
          {"p90_ms", r.p90_ms}, {"p99_ms", r.p99_ms}, {"p999_ms", r.p999_ms}, {"mean_ms", r.mean_ms},
          {"max_ms", r.max_ms}};
}

}  // namespace

int BenchServerCommand(const BenchServerArgs& args) {
  auto bodies = ReadBodies(args.requests, args.binary);
  if (!bodies.ok()) {
    std::fprintf(stderr, "rankd bench: %s\n", bodies.status().ToString().c_str());
    return 2;
  }
  LoadOptions options;
  options.host = args.host;
  options.port = args.port;
  options.target = "/v2/models/" + args.model + (args.version.empty() ? "" : "/versions/" + args.version) + "/infer";
  options.bodies = std::move(*bodies);
  options.seconds = args.seconds;
  options.warmup_seconds = args.warmup_seconds;
  options.connections = args.connections;
  options.timeout_seconds = args.timeout_seconds;
  json out = {{"command", args.command_line}, {"model", args.model}, {"requests", args.requests},
              {"bodies", options.bodies.size()}, {"binary", args.binary}, {"seconds", args.seconds}, {"connections", args.connections}};
  json results = json::array();
  double best_rate = 0;
  for (double rate : args.rates) {
    options.rate = rate;
    options.seed = static_cast<uint64_t>(rate * 1000) + 1;
    auto r = RunOpenLoop(options);
    if (!r.ok()) {
      std::fprintf(stderr, "rankd bench: %s\n", r.status().ToString().c_str());
      return 2;
    }
    std::fprintf(stderr, "rate %8.1f/s: achieved %8.1f/s  p50 %7.3f  p90 %7.3f  p99 %7.3f  p99.9 %7.3f ms  errors %lld  timeouts %lld\n",
                 rate, r->achieved_rate, r->p50_ms, r->p90_ms, r->p99_ms, r->p999_ms, static_cast<long long>(r->errors),
                 static_cast<long long>(r->timeouts));
    if (r->achieved_rate < 0.95 * rate) {
      std::fprintf(stderr, "  warning: the server (or this client) kept up with only %.0f%% of the offered rate\n",
                   100 * r->achieved_rate / rate);
    }
    bool within = r->errors == 0 && r->timeouts == 0 && r->achieved_rate >= 0.95 * rate &&
                  (args.p99_target_ms <= 0 || r->p99_ms <= args.p99_target_ms);
    if (within) best_rate = std::max(best_rate, rate);
    results.push_back(ToJson(*r));
  }
  out["results"] = results;
  if (args.p99_target_ms > 0) {
    out["p99_target_ms"] = args.p99_target_ms;
    out["highest_rate_within_target"] = best_rate;
    std::fprintf(stderr, "highest rate with p99 under %.3f ms, no errors, at least 95%% achieved: %.1f/s\n",
                 args.p99_target_ms, best_rate);
  }
  std::string text = out.dump(2);
  if (args.json_path.empty()) {
    std::printf("%s\n", text.c_str());
  } else {
    std::ofstream(args.json_path) << text << "\n";
  }
  if (!args.csv_path.empty()) {
    std::ofstream csv(args.csv_path);
    csv << "offered_rate,achieved_rate,p50_ms,p90_ms,p99_ms,p999_ms,errors,timeouts\n";
    for (const json& r : results) {
      csv << r["offered_rate"] << "," << r["achieved_rate"] << "," << r["p50_ms"] << "," << r["p90_ms"] << ","
          << r["p99_ms"] << "," << r["p999_ms"] << "," << r["errors"] << "," << r["timeouts"] << "\n";
    }
  }
  return 0;
}

}  // namespace rankd
