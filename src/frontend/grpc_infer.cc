#include "frontend/grpc_infer.h"

#include <google/protobuf/arena.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/grpc_control.h"
#include "frontend/grpc_request.h"
#include "frontend/infer_request_wire.h"
#include "serving/model.h"

namespace rankd {
namespace {

// The first block of a call's message arena (W1's 53 inputs but their contents take 15.7 KB of it).
constexpr size_t kRequestArenaBytes = 64 << 10;

}  // namespace

bool GrpcInfer::HandlesAtOnce(const grpc::ByteBuffer& bytes) const {
  if (bytes.Length() > kAtOnceMessageBytes) return false;
  thread_local std::vector<grpc::Slice> slices;  // this thread's, its capacity kept
  slices.clear();
  if (!bytes.Dump(&slices).ok() || slices.empty()) return false;
  const std::optional<NamedModel> named =
      PeekNamedModel({reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()});
  bool at_once = false;
  if (named) {
    StatusOr<int64_t> version =
        named->version.empty() ? StatusOr<int64_t>(int64_t{-1}) : ParseModelVersion(std::string(named->version));
    StatusOr<std::shared_ptr<const Model>> model =
        version.ok() ? infer_.repository().Get(named->name, *version) : version.status();
    at_once = !model.ok() || (*model)->batch_policy() != nullptr;
  }
  slices.clear();  // the message's references dropped
  return at_once;
}

void GrpcInfer::Infer(grpc::ServerContext& ctx, const grpc::ByteBuffer& bytes, grpc::ByteBuffer& answer,
                      Respond respond, bool run_here_when_idle) {
  auto received = InferService::Clock::now();
  // Read here, before InferAsync returns (the answer views none of it): the message's fields but
  // raw_input_contents and bytes_contents, whose entries and strings stay in the slices until the
  // request builder copies each to its place (infer_request_wire.h).
  // This thread's, their capacity kept from call to call (a W2 call grew them by about seven
  // allocations); emptied on the way out, since the slices hold the message's references.
  struct Scratch {
    std::vector<grpc::Slice> slices;
    std::vector<std::string_view> pieces;
    WireContents contents;
  };
  thread_local Scratch scratch;
  struct Emptied {
    Scratch& s;
    ~Emptied() {
      s.slices.clear();
      s.pieces.clear();
    }
  } emptied{scratch};
  std::vector<grpc::Slice>& slices = scratch.slices;
  std::vector<std::string_view>& pieces = scratch.pieces;
  WireContents& contents = scratch.contents;
  // The message on an arena whose first block is this thread's, reused call after call: its
  // inputs' messages, names, shapes and parameters take no heap allocation each.
  thread_local std::unique_ptr<char[]> block(new char[kRequestArenaBytes]);
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = block.get();
  arena_options.initial_block_size = kRequestArenaBytes;
  google::protobuf::Arena arena(arena_options);
  auto& q = *google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(&arena);
  try {
    grpc::Status dumped = bytes.Dump(&slices);
    if (!dumped.ok()) return respond(dumped);
    pieces.reserve(slices.size());
    for (const grpc::Slice& s : slices) pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
    Status read = ReadInferRequestInto(pieces, contents, q);
    if (!read.ok()) return respond(ToGrpc(read));
  } catch (const std::exception& e) {
    return respond(grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()));
  }
  auto v = ParseModelVersion(q.model_version());
  if (!v.ok()) return respond(ToGrpc(v.status()));
  const auto deadline = ctx.deadline();
  // The inputs read in place from shared memory (checked before answering), the outputs to write
  // into it, and the first failure (which fails the call).
  struct Regions {
    std::vector<SharedMemoryRegions::Use> inputs;  // read in place
    std::vector<SharedMemoryOutput> outputs;
    Status written;
  };
  auto regions = std::make_shared<Regions>();
  infer_.InferAsync(
      q.model_name(), *v, received,
      [&](const Model&) -> StatusOr<ParsedRequest> {
        RANKD_ASSIGN_OR_RETURN(ParsedRequest parsed, InferRequestFromProto(q, contents, max_elements_, &shared_memory_,
                                                                           &regions->outputs, &regions->inputs));
        if (deadline != std::chrono::system_clock::time_point::max()) {
          auto left =
              std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::system_clock::now());
          int64_t us = std::max<int64_t>(1, left.count());
          int64_t& timeout = parsed.request.timeout_us;
          timeout = timeout > 0 ? std::min(timeout, us) : us;
        }
        return parsed;
      },
      [&answer, regions](const Model& model, const InferRequest& req, const std::vector<InferOutput>& outputs) {
        regions->written = CheckSharedMemoryInputs(regions->inputs);
        if (regions->written.ok()) regions->written = WriteSharedMemoryOutputs(outputs, regions->outputs);
        if (!regions->written.ok()) return;
        inference::ModelInferResponse r;
        r.set_model_name(model.name());
        r.set_model_version(std::to_string(model.version()));
        r.set_id(req.id);
        for (const InferOutput& o : outputs) {
          auto* t = r.add_outputs();
          t->set_name(o.name);
          t->set_datatype(DTypeName(o.data.dtype()));
          for (int64_t d : o.data.shape()) t->add_shape(d);
          auto region = std::find_if(regions->outputs.begin(), regions->outputs.end(),
                                     [&](const SharedMemoryOutput& place) { return place.name == o.name; });
          if (region != regions->outputs.end()) {  // written there: described, with no raw contents entry
            (*t->mutable_parameters())["shared_memory_region"].set_string_param(region->region);
            (*t->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(o.data.bytes()));
            continue;
          }
          r.add_raw_output_contents(static_cast<const char*>(o.data.raw()), o.data.bytes());
        }
        bool own = false;
        grpc::Status written = grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(r, &answer, &own);
        if (!written.ok()) throw std::runtime_error("serialising the answer: " + written.error_message());
      },
      [regions, respond = std::move(respond)](const Status& s) { respond(ToGrpc(s.ok() ? regions->written : s)); },
      run_here_when_idle);
}

}  // namespace rankd
