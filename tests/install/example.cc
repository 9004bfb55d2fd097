// A program built against the installed rankd (tests/install_test.sh): it includes only
// <rankd/...>, links only librankd.so, loads a model and scores a request made from the model's
// own signature (string inputs given as PackedStrings, float inputs as views of the caller's
// memory that keep it alive), scores it again with ragged lengths sent as tensors, and reads where
// the scores lie.
#include <rankd/engine.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  std::printf("librankd %s\n", rankd::LibraryVersion());
  rankd::EngineOptions options;
  options.model_dir = argv[1];
  auto engine = rankd::Engine::Create(options);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  if ((*engine)->backend() != "cpu" || (*engine)->device() != 0) return 1;  // EngineOptions' defaults
  constexpr int64_t kRows = 3;
  rankd::InferRequest request;
  for (const rankd::InputSignature& in : (*engine)->inputs()) {
    rankd::InferInput x;
    x.name = in.name;
    const int64_t rows = in.user_scope ? 1 : kRows;
    rankd::Shape shape = {rows};
    if (in.ragged) {
      shape = {2 * rows};  // two ids a row, given with their lengths
      x.lengths.assign(static_cast<size_t>(rows), 2);
    } else {
      shape.insert(shape.end(), in.dims.begin(), in.dims.end());
    }
    if (in.strings) {  // BYTES: strings the model's config turns into ids
      x.strings.shape = shape;
      const auto count = static_cast<size_t>(rankd::NumElements(shape));
      x.strings.Reserve(count, 6 * count);  // then Append, or bytes written in place and EndString
      for (size_t i = 0; i < count; ++i) {
        if (i % 2 == 0) {
          x.strings.Append("value" + std::to_string(i % 5));
        } else {
          x.strings.bytes += "value" + std::to_string(i % 5);
          x.strings.EndString();
        }
      }
      request.inputs.push_back(std::move(x));
      continue;
    }
    if (in.dtype == rankd::DType::kF32) {  // the caller's own memory, kept alive by the tensor viewing it
      auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(rankd::NumElements(shape)));
      for (size_t i = 0; i < values->size(); ++i) (*values)[i] = 0.25f * static_cast<float>(i % 4);
      x.data = rankd::Tensor::View(in.dtype, shape, values->data(), rankd::MemoryLocation::Host(), values);
      values.reset();  // the view holds the only reference now
      if (!x.data.owns() || x.data.location().kind != rankd::MemoryKind::kHost) return 1;
      request.inputs.push_back(std::move(x));
      continue;
    }
    x.data = rankd::Tensor::Zeros(in.dtype, shape);
    if (in.dtype == rankd::DType::kI64) {
      for (int64_t i = 0; i < x.data.size(); ++i) x.data.data<int64_t>()[i] = i % 3;
    }
    request.inputs.push_back(std::move(x));
  }
  auto outputs = (*engine)->Infer(request);
  if (!outputs.ok()) {
    std::fprintf(stderr, "%s\n", outputs.status().ToString().c_str());
    return 1;
  }
  const rankd::Tensor& score = outputs->front().data;
  // The same request with each ragged input's lengths as a tensor of their own (NAME +
  // kLengthsTensorSuffix, INT32), as clients without per-input parameters send them: the same scores.
  rankd::InferRequest with_tensors;
  for (const rankd::InferInput& x : request.inputs) {
    with_tensors.inputs.push_back(x);
    if (x.lengths.empty()) continue;
    with_tensors.inputs.back().lengths.clear();
    rankd::InferInput lengths;
    lengths.name = x.name + std::string(rankd::kLengthsTensorSuffix);
    lengths.data = rankd::Tensor::Empty(rankd::DType::kI32, {static_cast<int64_t>(x.lengths.size())});
    for (size_t i = 0; i < x.lengths.size(); ++i) lengths.data.data<int32_t>()[i] = static_cast<int32_t>(x.lengths[i]);
    with_tensors.inputs.push_back(std::move(lengths));
  }
  auto again = (*engine)->Infer(with_tensors);
  if (!again.ok() || again->front().data.size() != score.size()) {
    std::fprintf(stderr, "lengths as tensors: %s\n", again.ok() ? "another shape" : again.status().ToString().c_str());
    return 1;
  }
  for (int64_t i = 0; i < score.size(); ++i) {
    if (again->front().data.data<float>()[i] != score.data<float>()[i]) return 1;
  }
  if (score.location() != rankd::MemoryLocation::Host()) {  // a CPU engine answers in host memory
    std::fprintf(stderr, "scores in %s\n", rankd::LocationToString(score.location()).c_str());
    return 1;
  }
  if (score.dim(0) != kRows) {
    std::fprintf(stderr, "%lld rows scored, %lld sent\n", static_cast<long long>(score.dim(0)),
                 static_cast<long long>(kRows));
    return 1;
  }
  const int64_t per_row = score.size() / kRows;
  for (int64_t r = 0; r < kRows; ++r) {  // each row through a view of it (Tensor::Rows: no copy)
    const rankd::Tensor row = score.Rows(r, 1);
    if (!row.owns() || row.data<float>() != score.data<float>() + r * per_row || row.size() != per_row) return 1;
    // The same bytes viewed by offset (Tensor::ViewBytes): where the row lies, not kept alive.
    const rankd::Tensor bytes = score.ViewBytes(rankd::DType::kF32, {per_row}, r * per_row * sizeof(float));
    if (bytes.owns() || bytes.data<float>() != row.data<float>() || bytes.location() != score.location()) return 1;
    // The row's keeper (Tensor::keeper) keeps the scores alive for a view made with it; a view
    // made without one has none.
    if (!row.keeper() || bytes.keeper()) return 1;
    const rankd::Tensor kept = rankd::Tensor::View(rankd::DType::kF32, {per_row}, const_cast<float*>(row.data<float>()),
                                                   row.location(), row.keeper());
    const auto same_owner = [](const auto& a, const auto& b) { return !a.owner_before(b) && !b.owner_before(a); };
    if (!kept.owns() || !same_owner(kept.keeper(), score.keeper())) return 1;
    for (int64_t i = 0; i < row.size(); ++i) {
      if (!std::isfinite(row.data<float>()[i])) return 1;
      std::printf("%s %g\n", outputs->front().name.c_str(), row.data<float>()[i]);
    }
  }
  return 0;
}
