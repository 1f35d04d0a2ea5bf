// store_meta.cpp: see store_meta.hpp.
#include "common/store_meta.hpp"

#include <charconv>
#include <utility>

#include "common/errors.hpp"
#include "common/rank_groups.hpp"

namespace itertime::store {
namespace {

const std::string* find(const std::map<std::string, std::string>& attributes, const char* key) {
  const auto found = attributes.find(key);
  return found == attributes.end() ? nullptr : &found->second;
}

int64_t parse_count(const std::map<std::string, std::string>& attributes, const char* key, const std::string& file) {
  const std::string* text = find(attributes, key);
  if (text == nullptr) return 0;
  int64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc() || stop != end || value < 0) {
    throw UserError(file + ": /meta " + key + " is '" + *text +
                    "', not a count; the file was not written by itertime or is damaged: calibrate again");
  }
  return value;
}

template <typename Parse>
auto parse_enum(const std::map<std::string, std::string>& attributes, const char* key, const std::string& file, Parse parse)
    -> std::optional<decltype(parse(std::string_view()))> {
  const std::string* text = find(attributes, key);
  if (text == nullptr) return std::nullopt;
  try {
    return parse(*text);
  } catch (const UserError& error) {
    throw UserError(file + ": /meta " + key + ": " + error.what());
  }
}

}  // namespace

StoreMeta parse_store_meta(const std::map<std::string, std::string>& attributes, const std::string& file) {
  StoreMeta meta;
  // "unknown" (or empty) is how a model saved without a backend reads back: the same as absent.
  if (const std::string* text = find(attributes, meta_key::kBackend); text != nullptr && !text->empty() && *text != "unknown") {
    meta.backend = parse_enum(attributes, meta_key::kBackend, file, [](std::string_view name) { return parse_backend(name); });
  }
  meta.attention =
      parse_enum(attributes, meta_key::kAttention, file, [](std::string_view text) { return parse_attention(text); });
  if (const std::string* text = find(attributes, meta_key::kLibtorchVersion)) meta.libtorch_version = *text;
  if (const std::string* text = find(attributes, meta_key::kHardware); text != nullptr && *text != "none") meta.hardware = *text;
  if (const std::string* text = find(attributes, meta_key::kGroundTruthModel)) meta.groundtruth_model = *text;
  meta.world_size = parse_count(attributes, meta_key::kWorldSize, file);
  meta.num_nodes = parse_count(attributes, meta_key::kNumNodes, file);
  meta.cpu_cores_per_node = parse_count(attributes, meta_key::kCpuCoresPerNode, file);
  meta.ops_compute_threads = parse_count(attributes, meta_key::kOpsComputeThreads, file);
  for (const auto& [key, field] : {std::pair{meta_key::kCommNodeOfRank, &meta.comm_node_of_rank},
                                   std::pair{meta_key::kGroundTruthNodeOfRank, &meta.groundtruth_node_of_rank}}) {
    const std::string* text = find(attributes, key);
    if (text == nullptr) continue;
    try {
      *field = parse_node_of_rank(*text);
    } catch (const UserError& error) {
      throw UserError(file + ": /meta " + key + ": " + error.what());
    }
  }
  return meta;
}

int64_t job_ranks_per_node(const StoreMeta& meta) {
  if (!meta.groundtruth_node_of_rank.empty()) return ranks_per_node_of(meta.groundtruth_node_of_rank);
  if (meta.num_nodes <= 1 || meta.world_size <= 0) return 0;
  return (meta.world_size + meta.num_nodes - 1) / meta.num_nodes;
}

StoreMeta read_store_meta(const h5::Store& store) { return parse_store_meta(store.meta(), store.path()); }

}  // namespace itertime::store
