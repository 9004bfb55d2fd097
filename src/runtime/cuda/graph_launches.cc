#include "runtime/cuda/graph_launches.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

// The most kernel nodes on one path through `graph`'s dependencies (0 where they cannot be read);
// `kernel[i]`: whether nodes[i] is one.
int KernelsInARow(cudaGraph_t graph, const std::vector<cudaGraphNode_t>& nodes, const std::vector<bool>& kernel) {
  size_t count = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count) != cudaSuccess) {
    cudaGetLastError();  // not left for the next launch's check
    return 0;
  }
  // With the edges' data: a capture's edges may carry some, and asking without it is an error.
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0 && cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::unordered_map<cudaGraphNode_t, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = i;
  std::vector<std::vector<size_t>> next(nodes.size());
  std::vector<int> pending(nodes.size(), 0), depth(nodes.size(), 0);
  for (size_t e = 0; e < count; ++e) {
    next[index.at(from[e])].push_back(index.at(to[e]));
    ++pending[index.at(to[e])];
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  int longest = 0;
  while (!ready.empty()) {  // in topological order: a node's depth is final once it is ready
    const size_t i = ready.back();
    ready.pop_back();
    if (kernel[i]) ++depth[i];
    longest = std::max(longest, depth[i]);
    for (size_t j : next[i]) {
      depth[j] = std::max(depth[j], depth[i]);
      if (--pending[j] == 0) ready.push_back(j);
    }
  }
  return longest;
}

}  // namespace

StatusOr<Executor::Launches> CountGraphLaunches(cudaGraph_t graph, std::span<const cudaGraphNode_t> copies) {
  size_t count = 0;
  RANKD_CUDA_RETURN(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) RANKD_CUDA_RETURN(cudaGraphGetNodes(graph, nodes.data(), &count));
  Executor::Launches launches;
  std::vector<bool> kernel(count, false);
  for (size_t i = 0; i < count; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    RANKD_CUDA_RETURN(cudaGraphNodeGetType(nodes[i], &type));
    const bool copy = std::find(copies.begin(), copies.end(), nodes[i]) != copies.end();
    kernel[i] = type == cudaGraphNodeTypeKernel && !copy;
    if (kernel[i])
      ++launches.kernels;
    else if (type == cudaGraphNodeTypeMemcpy || copy)
      ++launches.copies;
    else if (type == cudaGraphNodeTypeMemset)
      ++launches.memsets;
    else
      ++launches.other;
  }
  launches.kernels_in_a_row = KernelsInARow(graph, nodes, kernel);
  return launches;
}

}  // namespace rankd::cuda
