// `rankd bench server`: open-loop load at one or more rates against a running server over HTTP
// or gRPC (load_generator.h), a line per rate on stderr, and the results with the exact command
// line as JSON (and CSV). With --p99-target-ms it reports the highest rate whose p99 stayed under
// it. Warns when the server kept up with less than 95% of a rate, or when a rate's latency was
// not steady through the run (its quarters' medians differ by more than 25%).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "grpc_service.pb.h"
#include "tools/commands.h"
#include "tools/load_generator.h"
#include "tools/request_file.h"
#include "tools/shared_memory_bodies.h"
#include "tools/wire_tensor.h"

namespace rankd {
namespace {

using nlohmann::json;

// The request in KServe's binary tensor extension: a JSON header naming each input's datatype,
// shape and byte count, then the tensors' little-endian bytes, so the server does not parse
// numbers from text; the answer comes the same way. Ragged inputs go flat, their lengths as ReadRequests put them.
LoadOptions::Body ToBinary(const InferRequest& r) {
  json header = {{"id", r.id}, {"inputs", json::array()}};
  std::string tensors;
  for (const InferInput& x : r.inputs) {
    WireTensor w = ToWire(x);
    json in = {{"name", x.name},
               {"datatype", w.datatype},
               {"shape", w.shape},
               {"parameters", {{"binary_data_size", w.bytes.size()}}}};
    if (!x.lengths.empty()) in["parameters"]["lengths"] = x.lengths;
    header["inputs"].push_back(std::move(in));
    tensors += w.bytes;
  }
  // The scores asked for in binary, as tritonclient asks by default (an InferRequestedOutput's
  // binary_data, or binary_data_output where the request names no output): not printed as text.
  for (const std::string& o : r.outputs) {
    header["outputs"].push_back({{"name", o}, {"parameters", {{"binary_data", true}}}});
  }
  if (r.outputs.empty()) header["parameters"] = {{"binary_data_output", true}};
  LoadOptions::Body body;
  body.bytes = header.dump();
  body.json_length = body.bytes.size();
  body.bytes += tensors;
  return body;
}

// An input's elements in the typed field of `contents` its datatype goes in (KServe's v2 gRPC
// protocol: INT8 to INT32 in int_contents, UINT8 to UINT32 in uint_contents, FP16 and BF16 only
// raw).
Status ToTypedContents(const InferInput& x, inference::InferTensorContents& c) {
  if (x.is_bytes()) {
    for (int64_t i = 0; i < x.strings.size(); ++i) c.add_bytes_contents(std::string(x.strings.at(i)));
    return Status::Ok();
  }
  const Tensor& t = x.data;
  const int64_t n = t.size();
  switch (t.dtype()) {
    case DType::kF32:
      c.mutable_fp32_contents()->Add(t.data<float>(), t.data<float>() + n);
      return Status::Ok();
    case DType::kF64:
      c.mutable_fp64_contents()->Add(t.data<double>(), t.data<double>() + n);
      return Status::Ok();
    case DType::kI64:
      c.mutable_int64_contents()->Add(t.data<int64_t>(), t.data<int64_t>() + n);
      return Status::Ok();
    case DType::kI32:
      c.mutable_int_contents()->Add(t.data<int32_t>(), t.data<int32_t>() + n);
      return Status::Ok();
    case DType::kI8:
      for (int64_t i = 0; i < n; ++i) c.add_int_contents(t.data<int8_t>()[i]);
      return Status::Ok();
    case DType::kU8:
      for (int64_t i = 0; i < n; ++i) c.add_uint_contents(t.data<uint8_t>()[i]);
      return Status::Ok();
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) c.add_bool_contents(t.data<uint8_t>()[i] != 0);
      return Status::Ok();
    default:
      return InvalidArgument("input '" + x.name + "': " + DTypeName(t.dtype()) +
                             " has no typed contents (send it raw)");
  }
}

// The same request as a KServe v2 gRPC ModelInferRequest: raw little-endian tensors (or typed
// contents), ragged inputs as flat values, their lengths as ReadRequests put them (docs/serving.md).
StatusOr<LoadOptions::Body> ToGrpc(const InferRequest& r, const BenchServerArgs& args) {
  inference::ModelInferRequest p = GrpcRequestHeader(r, args.model, args.version);
  for (int i = 0; i < static_cast<int>(r.inputs.size()); ++i) {
    const InferInput& x = r.inputs[static_cast<size_t>(i)];
    if (args.typed) {
      RANKD_RETURN_IF_ERROR(ToTypedContents(x, *p.mutable_inputs(i)->mutable_contents()));
    } else {
      p.add_raw_input_contents(ToWire(x).bytes);
    }
  }
  for (const std::string& o : r.outputs) p.add_outputs()->set_name(o);
  return LoadOptions::Body{p.SerializeAsString(), 0};
}

// The request file's requests, each ragged input's lengths moved into an INT32 tensor NAME.lengths
// beside it when `args.lengths` says so (docs/serving.md).
StatusOr<std::vector<RequestLine>> ReadRequests(const BenchServerArgs& args) {
  RANKD_ASSIGN_OR_RETURN(std::vector<RequestLine> lines, ReadRequestFile(args.requests));
  if (args.lengths != "tensor") return lines;
  for (RequestLine& l : lines) {
    std::vector<InferInput> inputs;
    for (InferInput& x : l.request.inputs) {
      std::vector<int64_t> lengths = std::move(x.lengths);
      x.lengths.clear();
      inputs.push_back(std::move(x));
      if (lengths.empty()) continue;
      InferInput t;
      t.name = inputs.back().name + std::string(kLengthsTensorSuffix);
      t.data = Tensor::Empty(DType::kI32, {static_cast<int64_t>(lengths.size())});
      std::copy(lengths.begin(), lengths.end(), t.data.data<int32_t>());
      inputs.push_back(std::move(t));
    }
    l.request.inputs = std::move(inputs);
    l.length_sums.clear();  // of the lengths no input carries now
  }
  return lines;
}

// The requests' bodies, encoded for the protocol.
StatusOr<std::vector<LoadOptions::Body>> EncodeBodies(const std::vector<RequestLine>& lines,
                                                      const BenchServerArgs& args) {
  std::vector<LoadOptions::Body> bodies;
  for (const RequestLine& l : lines) {
    if (args.protocol == "grpc") {
      RANKD_ASSIGN_OR_RETURN(LoadOptions::Body body, ToGrpc(l.request, args));
      bodies.push_back(std::move(body));
    } else if (args.binary) {
      bodies.push_back(ToBinary(l.request));
    } else {
      bodies.push_back({l.text, 0});
    }
  }
  return bodies;
}

}  // namespace

int BenchServerCommand(const BenchServerArgs& args) {
  if (args.protocol == "grpc" && args.binary) {
    std::fprintf(stderr, "rankd bench: --binary is for HTTP (gRPC always sends raw tensors)\n");
    return 2;
  }
  if (args.typed && (args.protocol != "grpc" || !args.shared_memory.empty())) {
    std::fprintf(stderr, "rankd bench: --typed is for --protocol grpc without --shared-memory\n");
    return 2;
  }
  if (!args.shared_memory.empty() && args.binary) {
    std::fprintf(stderr, "rankd bench: --shared-memory sends no tensors in the body: it takes no --binary\n");
    return 2;
  }
  auto lines = ReadRequests(args);  // request_file.h refuses bad files
  if (!lines.ok()) {
    std::fprintf(stderr, "rankd bench: %s\n", lines.status().ToString().c_str());
    return 2;
  }
  std::vector<LoadOptions::Body> bodies;
  std::unique_ptr<SharedMemoryBodies> shared;  // registered until the command returns
  if (args.shared_memory.empty()) {
    auto encoded = EncodeBodies(*lines, args);
    if (!encoded.ok()) {
      std::fprintf(stderr, "rankd bench: %s\n", encoded.status().ToString().c_str());
      return 2;
    }
    bodies = std::move(*encoded);
  } else {
    std::vector<InferRequest> requests;
    for (RequestLine& l : *lines) requests.push_back(std::move(l.request));
    auto made = SharedMemoryBodies::Create({args.protocol, args.host, args.port, args.model, args.version}, requests);
    if (!made.ok()) {
      std::fprintf(stderr, "rankd bench: %s\n", made.status().ToString().c_str());
      return 2;
    }
    shared = std::move(*made);
    bodies = shared->bodies();
  }
  LoadOptions options;
  options.protocol = args.protocol == "grpc" ? LoadOptions::Protocol::kGrpc : LoadOptions::Protocol::kHttp;
  options.host = args.host;
  options.port = args.port;
  options.target = "/v2/models/" + args.model + (args.version.empty() ? "" : "/versions/" + args.version) + "/infer";
  options.bodies = std::move(bodies);
  options.seconds = args.seconds;
  options.warmup_seconds = args.warmup_seconds;
  options.connections = args.connections;
  options.threads = args.client_threads;
  options.timeout_seconds = args.timeout_seconds;
  json out = {{"command", args.command_line},
              {"model", args.model},
              {"requests", args.requests},
              {"bodies", options.bodies.size()},
              {"protocol", args.protocol},
              {"binary", args.binary},
              {"typed", args.typed},
              {"lengths", args.lengths},
              {"shared_memory", args.shared_memory},
              {"seconds", args.seconds},
              {"connections", args.connections},
              {"client_threads", args.client_threads}};
  json results = json::array();
  double best_rate = 0;
  for (size_t k = 0; k < args.rates.size(); ++k) {
    double rate = args.rates[k];
    std::fprintf(stderr, "[%zu/%zu] %.1f requests/s for %.0f s (+%.0f s warm-up) ...\n", k + 1, args.rates.size(), rate,
                 args.seconds, args.warmup_seconds);
    options.rate = rate;
    options.seed = static_cast<uint64_t>(rate * 1000) + 1;
    auto r = RunOpenLoop(options);
    if (!r.ok()) {
      std::fprintf(stderr, "rankd bench: %s\n", r.status().ToString().c_str());
      return 2;
    }
    std::fprintf(
        stderr,
        "rate %8.1f/s: achieved %8.1f/s  p50 %7.3f  p90 %7.3f  p99 %7.3f  p99.9 %7.3f ms  errors %lld  timeouts %lld\n",
        rate, r->achieved_rate, r->p50_ms, r->p90_ms, r->p99_ms, r->p999_ms, static_cast<long long>(r->errors),
        static_cast<long long>(r->timeouts));
    if (r->achieved_rate < 0.95 * rate) {
      std::fprintf(stderr, "  warning: the server (or this client) kept up with only %.0f%% of the offered rate\n",
                   100 * r->achieved_rate / rate);
    }
    if (r->spread > 0.25) {
      std::fprintf(stderr,
                   "  warning: the median latency of this rate's quarters differs by %.0f%%: not steady "
                   "(the server fell behind, or the machine was busy); do not trust this rate's figures\n",
                   100 * r->spread);
    }
    bool within = r->errors == 0 && r->timeouts == 0 && r->achieved_rate >= 0.95 * rate &&
                  (args.p99_target_ms <= 0 || r->p99_ms <= args.p99_target_ms);
    if (within) best_rate = std::max(best_rate, rate);
    results.push_back(LoadResultJson(*r));
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
