#include "tools/fresh_ids.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "embedding/access_trace.h"
#include "embedding/lookups.h"

namespace rankd {

std::vector<LookupInput> FindLookupInputs(const Model& model) {
  const Graph& graph = model.graph();
  std::map<int, int64_t> table_rows;
  for (const TableInfo& t : model.tables()) table_rows[t.value] = t.rows();
  std::map<std::string, int64_t> rows;  // by request input
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      const int ids = n.inputs[l.ids_input], table = n.inputs[l.table_input];
      const auto found = table_rows.find(table);
      if (found == table_rows.end() || std::find(graph.inputs.begin(), graph.inputs.end(), ids) == graph.inputs.end())
        continue;
      std::string name = graph.values[static_cast<size_t>(ids)].name;
      if (name.size() > 7 && name.ends_with(".values")) name.resize(name.size() - 7);  // a ragged input
      auto [at, fresh] = rows.emplace(name, found->second);
      if (!fresh) at->second = std::min(at->second, found->second);
    }
  }
  std::vector<LookupInput> out;
  for (const auto& [name, r] : rows) out.push_back({name, r});
  return out;
}

InferRequest FreshIdVariant(const InferRequest& request, const std::vector<LookupInput>& lookups, double zipf,
                            uint64_t seed) {
  InferRequest v = request;
  std::mt19937_64 rng(seed);
  for (InferInput& in : v.inputs) {
    const auto lookup =
        std::find_if(lookups.begin(), lookups.end(), [&](const LookupInput& l) { return l.input == in.name; });
    if (lookup == lookups.end() || lookup->rows <= 0 || !in.data.defined()) continue;
    if (in.data.dtype() != DType::kI64 && in.data.dtype() != DType::kI32) continue;
    Tensor ids = Tensor::Empty(in.data.dtype(), in.data.shape());  // not the file's request's storage
    std::memcpy(ids.raw(), in.data.raw(), in.data.bytes());
    const ZipfSampler zipf_rank(lookup->rows, zipf);
    auto draw = [&] {
      const auto rank = static_cast<uint64_t>(zipf_rank(rng));
      return static_cast<int64_t>(((rank - 1) * 2654435761ull + 97) % static_cast<uint64_t>(lookup->rows));
    };
    for (int64_t i = 0; i < ids.size(); ++i) {
      if (ids.dtype() == DType::kI64) {
        int64_t& id = ids.data<int64_t>()[i];
        if (id >= 0) id = draw();
      } else {
        int32_t& id = ids.data<int32_t>()[i];
        if (id >= 0) id = static_cast<int32_t>(draw());
      }
    }
    in.data = std::move(ids);
  }
  return v;
}

std::vector<InferRequest> FreshIdVariants(const std::vector<InferRequest>& requests,
                                          const std::vector<LookupInput>& lookups, int variants, double zipf,
                                          uint64_t seed) {
  const size_t n = requests.size() * static_cast<size_t>(std::max(variants, 0));
  std::vector<InferRequest> out(n);
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(n, 1));
  std::vector<std::thread> drawing;
  for (size_t t = 0; t < threads; ++t) {
    drawing.emplace_back([&, t] {
      for (size_t i = t; i < n; i += threads)
        out[i] = FreshIdVariant(requests[i % requests.size()], lookups, zipf, seed + i);
    });
  }
  for (std::thread& t : drawing) t.join();
  return out;
}

}  // namespace rankd
