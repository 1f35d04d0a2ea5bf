// nemo_config.cpp: NeMo 2 / Megatron-Bridge YAML (nemo_config.hpp). Key layout from Megatron-Bridge's
// src/megatron/bridge/training/config.py (ConfigContainer) and recipes/llama/h100/llama3.py, and NeMo 2's
// nemo/collections/llm/recipes (trainer.strategy, model.config, data, optim.config).
#include "formats/nemo_config.hpp"

#include <yaml-cpp/yaml.h>

#include <map>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "formats/whole_number.hpp"

namespace itertime::formats {
namespace {

struct Leaf {
  std::string key;  // dotted
  std::string value;
  int line = 0;
};

void flatten(const YAML::Node& node, const std::string& prefix, std::vector<Leaf>& out) {
  if (node.IsMap()) {
    for (const auto& item : node)
      flatten(item.second, prefix.empty() ? item.first.as<std::string>() : prefix + "." + item.first.as<std::string>(), out);
  } else if (node.IsSequence()) {
    std::string text = "[";
    for (std::size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) {
        flatten(node[i], prefix + "." + std::to_string(i), out);
        continue;
      }
      text += (text.size() > 1 ? ", " : "") + node[i].Scalar();
    }
    if (text.size() > 1) out.push_back({prefix, text + "]", node.Mark().line + 1});
  } else if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "null" || s == "~" || s == "None" || s.empty()) return;
    out.push_back({prefix, s, node.Mark().line + 1});
  }
}

std::string leaf_name(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The dest names these config classes share with Megatron-LM's arguments.
const std::vector<std::string>& same_names() {
  static const std::vector<std::string> names = {
      "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels", "seq_length",
      "max_position_embeddings", "micro_batch_size", "global_batch_size", "tensor_model_parallel_size",
      "pipeline_model_parallel_size", "context_parallel_size", "sequence_parallel", "use_distributed_optimizer",
      "overlap_grad_reduce", "overlap_param_gather", "recompute_granularity", "recompute_method", "recompute_num_layers", "bf16",
      "fp16", "fp8", "fp8_recipe", "fp8_param_gather", "tp_comm_overlap", "vocab_size", "normalization",
      "position_embedding_type", "rotary_base", "make_vocab_size_divisible_by", "transformer_impl", "add_bias_linear",
      "tokenizer_type", "tokenizer_model", "num_experts", "gradient_accumulation_fusion", "group_query_attention",
      // issue 44: what changes the split, the time or the memory
      "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "hidden_dropout", "attention_dropout",
      "cpu_offloading", "enable_cuda_graph", "external_cuda_graph", "cuda_graph_impl", "use_megatron_fsdp", "use_custom_fsdp",
      "use_torch_fsdp2", "optimizer_cpu_offload"};
  return names;
}

}  // namespace

// Long because it is one table-like walk from the YAML's keys (NeMo 2 / Megatron-Bridge layouts, Lightning's
// precision plugin) to Megatron-LM's arguments, each key a line or two, refusing keys that contradict each other.
static MegatronArguments nemo_arguments_checked(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    throw UserError(source + ":" + std::to_string(error.mark.line + 1) + ": not valid YAML: " + error.msg);
  }
  if (!root.IsMap()) throw UserError(source + ": not a YAML mapping of sections (model:, train:, ...)");
  std::vector<Leaf> leaves;
  try {
    flatten(root, "", leaves);
  } catch (const YAML::Exception& error) {
    throw UserError(source + ":" + std::to_string(error.mark.line + 1) + ": " + error.msg);
  }
  MegatronArguments out;
  out.source = source;
  int devices = 0, nodes = 0;
  const auto set = [&](const std::string& dest, const std::string& value, const Leaf& leaf) {
    const auto previous = out.values.find(dest);
    if (previous != out.values.end() && lower(previous->second) == lower(value)) {
      out.also_read.push_back(leaf.key + ": " + leaf.value + " (agrees with " + out.shown_as[dest] + ")");
      return;
    }
    if (previous != out.values.end()) {
      if (dest == "vocab_size") {  // the model's vocabulary wins over a tokenizer's
        if (leaf.key.rfind("model.", 0) != 0) {
          out.also_read.push_back(leaf.key + ": " + value + " (a tokenizer's; " + out.shown_as[dest] + " wins)");
          return;
        }
        out.also_read.push_back(out.shown_as[dest] + ": " + previous->second + " (a tokenizer's; " + leaf.key + " wins)");
      } else {
        throw UserError(source + ":" + std::to_string(leaf.line) + ": " + leaf.key + ": " + value + " contradicts " +
                        out.shown_as[dest] + ": " + previous->second + " (line " + std::to_string(out.line_of[dest]) + ")");
      }
    }
    out.values[dest] = value;
    out.line_of[dest] = leaf.line;
    out.shown_as[dest] = leaf.key;
  };
  const auto whole = [&](const Leaf& leaf) {
    const std::optional<int> n = positive_whole_number(leaf.value);
    if (!n)
      throw UserError(source + ":" + std::to_string(leaf.line) + ": " + leaf.key + ": " + leaf.value +
                      ": not a positive whole number");
    return *n;
  };
  for (const Leaf& leaf : leaves) {
    const std::string name = leaf_name(leaf.key);
    if (std::find(same_names().begin(), same_names().end(), name) != same_names().end()) {
      if (name == "vocab_size" && leaf.key.rfind("model.", 0) != 0 && out.values.count("vocab_size") &&
          out.shown_as["vocab_size"].rfind("model.", 0) == 0) {
        if (lower(out.values["vocab_size"]) != lower(leaf.value))  // (an equal one: set() lists it as agreeing)
          out.also_read.push_back(leaf.key + ": " + leaf.value + " (a tokenizer's; " + out.shown_as["vocab_size"] + " wins)");
        else
          out.also_read.push_back(leaf.key + ": " + leaf.value + " (agrees with " + out.shown_as["vocab_size"] + ")");
        continue;  // a tokenizer's vocabulary after the model's
      }
      set(name, leaf.value, leaf);
    } else if (name == "gated_linear_unit") {
      set("swiglu", leaf.value, leaf);
    } else if (name == "share_embeddings_and_output_weights") {
      set(name, leaf.value, leaf);
    } else if (name == "layernorm_epsilon") {
      set("norm_epsilon", leaf.value, leaf);
    } else if (name == "virtual_pipeline_model_parallel_size") {
      set("num_virtual_stages_per_pipeline_rank", leaf.value, leaf);
    } else if (name == "num_layers_in_first_pipeline_stage") {  // TransformerConfig's name of the option
      set("decoder_first_pipeline_num_layers", leaf.value, leaf);
    } else if (name == "num_layers_in_last_pipeline_stage") {
      set("decoder_last_pipeline_num_layers", leaf.value, leaf);
    } else if (name == "num_moe_experts") {
      set("num_experts", leaf.value, leaf);
    } else if (name == "fp8_param") {
      set("fp8_param_gather", leaf.value, leaf);
    } else if (leaf.key == "mixed_precision" || (name == "precision" && leaf.key.find("plugins") != std::string::npos)) {
      // A recipe's name (Megatron-Bridge's mixed_precision.py, Lightning's precision plugin).
      const std::string v = lower(leaf.value);
      if (v.find("bf16") != std::string::npos)
        set("bf16", "true", leaf);
      else if (v.find("16") != std::string::npos)
        set("fp16", "true", leaf);
      else
        set("fp32_precision", leaf.value, leaf);
      if (v.find("mxfp8") != std::string::npos)
        set("fp8_recipe", "mxfp8", leaf);
      else if (v.find("fp8") != std::string::npos) {
        set("fp8", "hybrid", leaf);
        set("fp8_recipe", v.find("current") != std::string::npos ? "tensorwise" : "delayed", leaf);
      }
    } else if (name == "devices" && leaf.key.rfind("trainer.", 0) == 0) {
      devices = whole(leaf);
      out.line_of["devices"] = leaf.line;
    } else if (name == "num_nodes" && leaf.key.rfind("trainer.", 0) == 0) {
      nodes = whole(leaf);
    } else {
      // Not ours: kept under its dotted name, listed by the mapping as not understood.
      out.values[leaf.key] = leaf.value;
      out.line_of[leaf.key] = leaf.line;
      out.shown_as[leaf.key] = leaf.key;
    }
  }
  if (devices > 0) out.world_size = devices * (nodes > 0 ? nodes : 1);
  // NeMo's and Megatron-Bridge's LLaMA providers train without dropout (hidden_dropout and attention_dropout
  // 0.0, where Megatron-LM's own default is 0.1): a dump without the keys is read as theirs, and says so.
  for (const char* key : {"hidden_dropout", "attention_dropout"}) {
    if (out.values.count(key) != 0) continue;
    out.values[key] = "0";
    out.shown_as[key] = std::string("model.") + key + " (absent: the LLaMA providers' default)";
  }
  return out;
}

UserRun read_nemo_config_text(const std::string& yaml_text, const std::string& source) {
  UserRun run = user_run_from_megatron(nemo_arguments(yaml_text, source));
  run.format = "nemo";
  return run;
}

MegatronArguments nemo_arguments(const std::string& yaml_text, const std::string& source) {
  return refusing_in_one_line([&] { return nemo_arguments_checked(yaml_text, source); });
}

}  // namespace itertime::formats
