// torchtitan_toml.cpp: torchtitan job TOML (torchtitan_toml.hpp).
#include "formats/torchtitan_toml.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "common/errors.hpp"
#include "formats/megatron_arguments.hpp"

namespace itertime::formats {
namespace {

constexpr long long kIntegerLimit = 2147483647;  // 2^31 - 1

struct Leaf {
  std::string value;
  int line = 0;
  bool is_string = false, is_integer = false, is_bool = false;
};

std::string text_of(const toml::node& node) {
  if (const auto s = node.value<std::string>(); s && node.is_string()) return *s;
  if (node.is_integer()) return std::to_string(*node.value<int64_t>());
  if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
  if (node.is_floating_point()) {
    std::ostringstream out;
    out << *node.value<double>();
    return out.str();
  }
  if (const toml::array* array = node.as_array()) {
    std::string out = "[";
    for (const toml::node& item : *array) out += (out.size() > 1 ? ", " : "") + text_of(item);
    return out + "]";
  }
  return "(a date or time)";
}

void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, Leaf>& out) {
  for (auto&& [key, node] : table) {
    const std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      flatten(*inner, name, out);
    } else {
      out[name] = {text_of(node), static_cast<int>(node.source().begin.line), node.is_string(), node.is_integer(),
                   node.is_boolean()};
    }
  }
}

struct Flavor {
  int64_t layers, hidden, ffn, heads, kv_heads;
};

// torchtitan/models/llama3/__init__.py (llama3_configs; ffn from ffn_dim_multiplier and multiple_of).
const std::map<std::string, Flavor>& flavors() {
  static const std::map<std::string, Flavor> table = {
      {"8B", {32, 4096, 14336, 32, 8}}, {"70B", {80, 8192, 28672, 64, 8}}, {"405B", {126, 16384, 53248, 128, 8}}};
  return table;
}

class Toml {
 public:
  Toml(std::map<std::string, Leaf> leaves, std::string source) : leaves_(std::move(leaves)), source_(std::move(source)) {}
  const Leaf* get(const std::string& key) {
    const auto it = leaves_.find(key);
    if (it == leaves_.end()) return nullptr;
    used_.push_back(key);
    return &it->second;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    const Leaf& leaf = leaves_.at(key);
    throw UserError(source_ + ":" + std::to_string(leaf.line) + ": " + key + " = " + leaf.value + ": " + why);
  }
  std::optional<int64_t> integer(const std::string& key) {
    const Leaf* leaf = get(key);
    if (!leaf) return std::nullopt;
    if (!leaf->is_integer) fail(key, "not a whole number");
    // Sizes, batches and degrees (-1: torchtitan's "the rest"): far below 2^31, so that their products
    // (a global batch from the local one and the data-parallel degree) stay exact in int64.
    const long long value = std::stoll(leaf->value);
    if (value < -kIntegerLimit || value > kIntegerLimit) fail(key, "out of range (a size, batch or degree)");
    return value;
  }
  std::optional<std::string> string(const std::string& key) {
    const Leaf* leaf = get(key);
    if (!leaf) return std::nullopt;
    if (!leaf->is_string) fail(key, "not a string");
    return leaf->value;
  }
  bool boolean(const std::string& key) {
    const Leaf* leaf = get(key);
    if (!leaf) return false;
    if (!leaf->is_bool) fail(key, "not true or false");
    return leaf->value == "true";
  }
  int line(const std::string& key) const {
    const auto it = leaves_.find(key);
    return it == leaves_.end() ? 0 : it->second.line;
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& [key, leaf] : leaves_)
      if (std::find(used_.begin(), used_.end(), key) == used_.end()) out.push_back(key + " = " + leaf.value);
    return out;
  }
  std::vector<std::string> read() const {
    std::vector<std::string> out;
    for (const std::string& key : used_) out.push_back(key + " = " + leaves_.at(key).value);
    return out;
  }

 private:
  std::map<std::string, Leaf> leaves_;
  std::string source_;
  std::vector<std::string> used_;
};

}  // namespace

// Long because it maps torchtitan's TOML sections ([model], [parallelism], [training], the float8 converter,
// activation checkpointing, FSDP2) into one run through one reader that refuses every key left unused.
static UserRun read_torchtitan_toml_text_checked(const std::string& toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& error) {
    throw UserError(source + ":" + std::to_string(error.source().begin.line) +
                    ": not valid TOML: " + std::string(error.description()));
  }
  std::map<std::string, Leaf> leaves;
  flatten(root, "", leaves);
  Toml t(std::move(leaves), source);
  MegatronArguments a;
  a.source = source;
  std::vector<std::string> assumed;
  const auto set = [&](const std::string& dest, const std::string& value, const std::string& key) {
    a.values[dest] = value;
    a.line_of[dest] = t.line(key);
    a.shown_as[dest] = key;
  };

  const std::string name = t.string("model.name").value_or("");
  if (name != "llama3")
    throw UserError(source + ":" + std::to_string(t.line("model.name")) + ": model.name " +
                    (name.empty() ? "missing" : "\"" + name + "\"") +
                    ": itertime reads torchtitan's llama3 models (flavor 8B, 70B, 405B)");
  const std::string flavor = t.string("model.flavor").value_or("");
  const auto sizes = flavors().find(flavor);
  if (sizes == flavors().end())
    throw UserError(source + ":" + std::to_string(t.line("model.flavor")) + ": model.flavor \"" + flavor +
                    "\": not a llama3 flavor itertime knows (8B, 70B, 405B)");
  const Flavor& f = sizes->second;
  set("num_layers", std::to_string(f.layers), "model.flavor");
  set("hidden_size", std::to_string(f.hidden), "model.flavor");
  set("ffn_hidden_size", std::to_string(f.ffn), "model.flavor");
  set("num_attention_heads", std::to_string(f.heads), "model.flavor");
  set("group_query_attention", "true", "model.flavor");
  set("num_query_groups", std::to_string(f.kv_heads), "model.flavor");
  set("vocab_size", "128256", "model.flavor");
  set("max_position_embeddings", "131072", "model.flavor");
  set("norm_epsilon", "1e-05", "model.flavor");
  set("rotary_base", "500000", "model.flavor");
  set("normalization", "RMSNorm", "model.flavor");
  set("position_embedding_type", "rope", "model.flavor");
  set("swiglu", "true", "model.flavor");
  set("add_bias_linear", "false", "model.flavor");
  set("untie_embeddings_and_output_weights", "true", "model.flavor");
  // torchtitan's llama3 has no dropout layer (Megatron-LM's default would be 0.1: issue 44).
  set("hidden_dropout", "0", "model.flavor");
  set("attention_dropout", "0", "model.flavor");

  const auto seq = t.integer("training.seq_len");
  if (!seq) throw UserError(source + ": no training.seq_len (the sequence length); give it");
  set("seq_length", std::to_string(*seq), "training.seq_len");
  std::optional<int64_t> local = t.integer("training.local_batch_size");
  std::string local_key = "training.local_batch_size";
  if (!local) {
    local = t.integer("training.batch_size");
    local_key = "training.batch_size";
  }
  if (!local) throw UserError(source + ": no training.local_batch_size (the batch per data-parallel rank); give it");
  if (*local < 1) t.fail(local_key, "must be positive");

  const int64_t tp = t.integer("parallelism.tensor_parallel_degree").value_or(1);
  const int64_t pp = t.integer("parallelism.pipeline_parallel_degree").value_or(1);
  const int64_t cp = t.integer("parallelism.context_parallel_degree").value_or(1);
  const int64_t replicate = t.integer("parallelism.data_parallel_replicate_degree").value_or(1);
  const int64_t shard = t.integer("parallelism.data_parallel_shard_degree").value_or(-1);
  for (const auto& [key, value] : {std::pair<std::string, int64_t>{"parallelism.tensor_parallel_degree", tp},
                                   {"parallelism.pipeline_parallel_degree", pp},
                                   {"parallelism.context_parallel_degree", cp},
                                   {"parallelism.data_parallel_replicate_degree", replicate}}) {
    if (value < 1) t.fail(key, "must be positive");
  }
  if (shard == 0 || shard < -1) t.fail("parallelism.data_parallel_shard_degree", "must be positive, or -1 (the rest)");
  set("tensor_model_parallel_size", std::to_string(tp), "parallelism.tensor_parallel_degree");
  set("pipeline_model_parallel_size", std::to_string(pp), "parallelism.pipeline_parallel_degree");
  set("context_parallel_size", std::to_string(cp), "parallelism.context_parallel_degree");
  const int64_t dp = shard > 0 ? replicate * shard : 0;
  if (dp > 0) a.world_size = static_cast<int>(dp * tp * pp * cp);

  int64_t micro = *local;
  if (pp > 1) {
    micro = t.integer("parallelism.pipeline_parallel_microbatch_size").value_or(1);
    if (micro < 1 || *local % micro != 0) t.fail("parallelism.pipeline_parallel_microbatch_size", "must divide " + local_key);
    const std::string schedule = t.string("parallelism.pipeline_parallel_schedule").value_or("1F1B");
    if (schedule == "Interleaved1F1B") {
      const auto per_stage = t.integer("parallelism.pipeline_parallel_layers_per_stage");
      if (per_stage) {
        set("num_layers_per_virtual_pipeline_stage", std::to_string(*per_stage),
            "parallelism.pipeline_parallel_layers_per_stage");
      } else {
        set("num_virtual_stages_per_pipeline_rank", "2", "parallelism.pipeline_parallel_schedule");
        assumed.push_back("2 virtual stages per pipeline rank (Interleaved1F1B without pipeline_parallel_layers_per_stage)");
      }
    } else if (schedule != "1F1B") {
      t.fail("parallelism.pipeline_parallel_schedule", "itertime models 1F1B and Interleaved1F1B only");
    }
  }
  set("micro_batch_size", std::to_string(micro), pp > 1 ? "parallelism.pipeline_parallel_microbatch_size" : local_key);
  const int64_t global = t.integer("training.global_batch_size").value_or(-1);
  bool global_given = false;
  if (global > 0) {
    set("global_batch_size", std::to_string(global), "training.global_batch_size");
    global_given = true;
  } else if (dp > 0) {
    set("global_batch_size", std::to_string(*local * dp), local_key);
    assumed.push_back("global batch " + std::to_string(*local * dp) + " = " + local_key + " x dp " + std::to_string(dp) +
                      " (torchtitan's default)");
    global_given = true;
  }

  const std::string param = t.string("training.mixed_precision_param").value_or("bfloat16");
  if (param != "bfloat16") t.fail("training.mixed_precision_param", "the framework model predicts bf16 mixed precision only");
  set("bf16", "true", "training.mixed_precision_param");
  t.string("training.mixed_precision_reduce");  // float32, as Megatron's fp32 gradient reduction

  // float8: a converter named float8 ([model] converters, or the older [float8] section).
  bool fp8 = false;
  if (const Leaf* converters = t.get("model.converters"); converters && converters->value.find("float8") != std::string::npos)
    fp8 = true;
  std::string recipe = "tensorwise";
  for (const char* key : {"quantize.linear.float8.recipe_name", "float8.recipe_name"}) {
    if (const auto name8 = t.string(key)) {
      recipe = *name8;
      if (recipe != "tensorwise") t.fail(key, "itertime models tensorwise (current) fp8 scaling only");
    }
  }
  bool fp8_gather = false;
  for (const char* key : {"quantize.linear.float8.enable_fsdp_float8_all_gather", "float8.enable_fsdp_float8_all_gather"})
    fp8_gather = t.boolean(key) || fp8_gather;
  for (const char* key : {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", "quantize.linear.float8.filter_fqns",
                          "float8.precompute_float8_dynamic_scale_for_fsdp", "float8.filter_fqns"})
    t.get(key);  // read: the fp8 scaling's details, no effect on the model
  if (fp8) {
    set("fp8", "hybrid", "model.converters");
    set("fp8_recipe", "tensorwise", "model.converters");
    if (fp8_gather) set("fp8_param_gather", "true", "quantize.linear.float8.enable_fsdp_float8_all_gather");
    assumed.push_back("float8 as Transformer Engine's fp8 with tensorwise (current) scaling");
  }

  // FSDP2 as the distributed optimizer with overlapped reduce-scatter and all-gather (see the header).
  const int64_t dp_or_unknown = dp > 0 ? dp : 2;
  if (dp_or_unknown * cp > 1) {
    set("use_distributed_optimizer", "true", "parallelism.data_parallel_shard_degree");
    set("overlap_grad_reduce", "true", "parallelism.data_parallel_shard_degree");
    set("overlap_param_gather", "true", "parallelism.data_parallel_shard_degree");
  }
  assumed.push_back(
      "FSDP2 (torchtitan's data parallelism, ZeRO-3) predicted as Megatron-Core's distributed optimizer "
      "(ZeRO-1) with overlapped gradient reduce-scatter and parameter all-gather: its second all-gather in "
      "the backward and its smaller memory are not modelled");
  if (tp > 1) {
    set("sequence_parallel", "true", "parallelism.tensor_parallel_degree");
    assumed.push_back(
        "tensor parallelism as Megatron's with sequence parallelism (torchtitan's plan shards the norms along the sequence)");
    if (t.boolean("parallelism.enable_async_tensor_parallel"))
      set("tp_comm_overlap", "true", "parallelism.enable_async_tensor_parallel");
  } else {
    t.boolean("parallelism.enable_async_tensor_parallel");
  }
  t.get("parallelism.disable_loss_parallel");  // Megatron's output layer is vocabulary-parallel either way

  const std::string mode = t.string("activation_checkpoint.mode").value_or("selective");
  if (mode == "full") {
    set("recompute_granularity", "full", "activation_checkpoint.mode");
    set("recompute_method", "uniform", "activation_checkpoint.mode");
  } else if (mode == "selective") {
    const std::string option = t.string("activation_checkpoint.selective_ac_option").value_or("op");
    if (option == "op") {
      set("recompute_granularity", "selective", "activation_checkpoint.mode");
      assumed.push_back("selective activation checkpointing (op) as Megatron's selective recompute of the attention core");
    } else if (option == "1") {
      set("recompute_granularity", "full", "activation_checkpoint.selective_ac_option");
      set("recompute_method", "uniform", "activation_checkpoint.selective_ac_option");
    } else {
      t.fail("activation_checkpoint.selective_ac_option", "itertime models op, or 1 (every layer), only");
    }
  } else if (mode != "none") {
    t.fail("activation_checkpoint.mode", "itertime models none, selective and full only");
  }
  if (t.boolean("compile.enable"))
    assumed.push_back("torch.compile predicted as Megatron-Core's fused Transformer Engine kernels");
  t.get("compile.components");

  UserRun run = user_run_from_megatron(a);
  run.format = "torchtitan";
  run.read = t.read();
  run.not_understood = t.unused();
  if (!global_given) {
    run.global_batch_given = false;
    run.batch_per_dp_rank = static_cast<int>(*local);
  }
  run.assumed.insert(run.assumed.end(), assumed.begin(), assumed.end());
  return run;
}

UserRun read_torchtitan_toml_text(const std::string& toml_text, const std::string& source) {
  return refusing_in_one_line([&] { return read_torchtitan_toml_text_checked(toml_text, source); });
}

}  // namespace itertime::formats
