// megatron_args.cpp: Megatron-LM command lines and arguments files (megatron_args.hpp).
#include "formats/megatron_args.hpp"

#include <cctype>
#include <map>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "formats/whole_number.hpp"

namespace itertime::formats {
namespace {

enum class Kind { kTrue, kFalse, kValue };
struct Known {
  const char* dest;
  Kind kind;
};

// Megatron-LM's options this reader knows (megatron/training/arguments.py, before #2896 generated them
// from TransformerConfig with the same names): the option, its argparse dest and how it takes a value.
const std::map<std::string, Known>& known_options() {
  static const std::map<std::string, Known> table = {
      {"--num-layers", {"num_layers", Kind::kValue}},
      {"--hidden-size", {"hidden_size", Kind::kValue}},
      {"--ffn-hidden-size", {"ffn_hidden_size", Kind::kValue}},
      {"--num-attention-heads", {"num_attention_heads", Kind::kValue}},
      {"--kv-channels", {"kv_channels", Kind::kValue}},
      {"--group-query-attention", {"group_query_attention", Kind::kTrue}},
      {"--num-query-groups", {"num_query_groups", Kind::kValue}},
      {"--seq-length", {"seq_length", Kind::kValue}},
      {"--max-position-embeddings", {"max_position_embeddings", Kind::kValue}},
      {"--micro-batch-size", {"micro_batch_size", Kind::kValue}},
      {"--global-batch-size", {"global_batch_size", Kind::kValue}},
      {"--tensor-model-parallel-size", {"tensor_model_parallel_size", Kind::kValue}},
      {"--pipeline-model-parallel-size", {"pipeline_model_parallel_size", Kind::kValue}},
      {"--context-parallel-size", {"context_parallel_size", Kind::kValue}},
      {"--num-layers-per-virtual-pipeline-stage", {"num_layers_per_virtual_pipeline_stage", Kind::kValue}},
      {"--num-virtual-stages-per-pipeline-rank", {"num_virtual_stages_per_pipeline_rank", Kind::kValue}},
      {"--account-for-embedding-in-pipeline-split", {"account_for_embedding_in_pipeline_split", Kind::kTrue}},
      {"--account-for-loss-in-pipeline-split", {"account_for_loss_in_pipeline_split", Kind::kTrue}},
      {"--decoder-first-pipeline-num-layers", {"decoder_first_pipeline_num_layers", Kind::kValue}},
      {"--decoder-last-pipeline-num-layers", {"decoder_last_pipeline_num_layers", Kind::kValue}},
      {"--sequence-parallel", {"sequence_parallel", Kind::kTrue}},
      {"--use-distributed-optimizer", {"use_distributed_optimizer", Kind::kTrue}},
      {"--overlap-grad-reduce", {"overlap_grad_reduce", Kind::kTrue}},
      {"--overlap-param-gather", {"overlap_param_gather", Kind::kTrue}},
      {"--recompute-granularity", {"recompute_granularity", Kind::kValue}},
      {"--recompute-method", {"recompute_method", Kind::kValue}},
      {"--recompute-num-layers", {"recompute_num_layers", Kind::kValue}},
      {"--bf16", {"bf16", Kind::kTrue}},
      {"--fp16", {"fp16", Kind::kTrue}},
      {"--fp8-format", {"fp8", Kind::kValue}},
      {"--fp8-recipe", {"fp8_recipe", Kind::kValue}},
      {"--fp8-param-gather", {"fp8_param_gather", Kind::kTrue}},
      {"--tp-comm-overlap", {"tp_comm_overlap", Kind::kTrue}},
      {"--swiglu", {"swiglu", Kind::kTrue}},
      {"--untie-embeddings-and-output-weights", {"untie_embeddings_and_output_weights", Kind::kTrue}},
      {"--vocab-size", {"vocab_size", Kind::kValue}},
      {"--tokenizer-type", {"tokenizer_type", Kind::kValue}},
      {"--tokenizer-model", {"tokenizer_model", Kind::kValue}},
      {"--normalization", {"normalization", Kind::kValue}},
      {"--norm-epsilon", {"norm_epsilon", Kind::kValue}},
      {"--position-embedding-type", {"position_embedding_type", Kind::kValue}},
      {"--rotary-base", {"rotary_base", Kind::kValue}},
      {"--disable-bias-linear", {"add_bias_linear", Kind::kFalse}},
      {"--make-vocab-size-divisible-by", {"make_vocab_size_divisible_by", Kind::kValue}},
      {"--no-gradient-accumulation-fusion", {"gradient_accumulation_fusion", Kind::kFalse}},
      {"--num-experts", {"num_experts", Kind::kValue}},
      {"--transformer-impl", {"transformer_impl", Kind::kValue}},
      {"--use-mcore-models", {"use_mcore_models", Kind::kTrue}},
      {"--use-flash-attn", {"use_flash_attn", Kind::kTrue}},
      {"--attention-backend", {"attention_backend", Kind::kValue}},
  };
  return table;
}

std::string at(const std::string& source, int line) {
  return line > 0 ? source + ":" + std::to_string(line) + ": " : source + ": ";
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

int positive_int(const Word& word, const std::string& option, const std::string& source) {
  const std::optional<int> value = positive_whole_number(word.text);
  if (!value) throw UserError(at(source, word.line) + option + " " + word.text + ": not a positive whole number");
  return *value;
}

}  // namespace

static std::vector<Word> split_words_checked(const std::string& text, const std::string& source, bool lines) {
  std::vector<Word> words;
  int line = 1;
  std::string current;
  bool in_word = false;
  int word_line = 1;
  const auto finish = [&] {
    if (in_word) words.push_back({current, lines ? word_line : 0});
    current.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      finish();
      ++line;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      finish();  // a continuation: the next line goes on
      if (text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n') ++i;
      ++i;
      ++line;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      finish();
    } else if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      if (!in_word) word_line = line;
      in_word = true;
      const int opened = line;
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != c; ++j) {
        if (c == '"' && text[j] == '\\' && j + 1 < text.size()) ++j;
        if (text[j] == '\n') ++line;
        current += text[j];
      }
      if (j >= text.size())
        throw UserError(at(source, lines ? opened : 0) + "a quote (" + std::string(1, c) + ") is never closed");
      i = j;
    } else if (c == '\\' && i + 1 < text.size()) {
      if (!in_word) word_line = line;
      in_word = true;
      current += text[++i];
    } else {
      if (!in_word) word_line = line;
      in_word = true;
      current += c;
    }
  }
  finish();
  return words;
}

// A launcher line: the script's arguments follow the first word ending in .py; torchrun's sizes before it
// give the world size (out.world_size). Returns the index of the first argument (0 without a launcher line).
static std::size_t arguments_start(const std::vector<Word>& all, const std::string& source, MegatronArguments& out) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!ends_with(all[i].text, ".py")) continue;
    int nproc = 0, nnodes = 1;
    for (std::size_t j = 0; j + 1 < i; ++j) {
      std::string name = all[j].text, value = all[j + 1].text;
      const std::size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (name == "--nproc-per-node" || name == "--nproc_per_node") nproc = positive_int({value, all[j].line}, name, source);
      if (name == "--nnodes") nnodes = positive_int({value, all[j].line}, name, source);
    }
    if (nproc > 0) out.world_size = nproc * nnodes;
    return i + 1;
  }
  return 0;
}

static MegatronArguments megatron_arguments_from_words_checked(const std::vector<Word>& all, const std::string& source) {
  MegatronArguments out;
  out.source = source;
  const std::size_t start = arguments_start(all, source, out);
  std::map<std::string, std::string> first_option;  // dest -> the option text that set it
  for (std::size_t i = start; i < all.size();) {
    const Word& word = all[i];
    if (word.text.rfind("--", 0) != 0 || word.text == "--") {
      out.stray.push_back(word.text);
      ++i;
      continue;
    }
    std::string option = word.text;
    std::vector<std::string> values;
    bool inline_value = false;
    const std::size_t eq = option.find('=');
    if (eq != std::string::npos) {
      values.push_back(option.substr(eq + 1));
      option = option.substr(0, eq);
      inline_value = true;
    }
    ++i;
    const auto known = known_options().find(option);
    const bool flag = known != known_options().end() && known->second.kind != Kind::kValue;
    if (!flag && !inline_value) {
      while (i < all.size() && all[i].text.rfind("--", 0) != 0) values.push_back(all[i++].text);
    }
    std::string dest, value;
    if (known == known_options().end()) {
      dest = option.substr(2);
      for (char& c : dest)
        if (c == '-') c = '_';
      value = values.empty() ? "true" : values[0];
      for (std::size_t v = 1; v < values.size(); ++v) value += " " + values[v];
    } else if (flag) {
      if (inline_value) throw UserError(at(source, word.line) + option + " is a flag: it takes no value (" + values[0] + ")");
      dest = known->second.dest;
      value = known->second.kind == Kind::kTrue ? "true" : "false";
    } else {
      dest = known->second.dest;
      if (values.empty()) throw UserError(at(source, word.line) + option + ": no value follows it");
      if (values.size() > 1)
        throw UserError(at(source, word.line) + option + " " + values[0] + ": takes one value, then comes '" + values[1] + "'");
      value = values[0];
    }
    const auto previous = out.values.find(dest);
    if (previous != out.values.end() && previous->second != value) {
      throw UserError(at(source, word.line) + option + " " + value + " contradicts " + first_option[dest] + " " +
                      previous->second + (out.line_of[dest] > 0 ? " (line " + std::to_string(out.line_of[dest]) + ")" : ""));
    }
    out.values[dest] = value;
    out.line_of[dest] = word.line;
    first_option[dest] = option;
    if (known == known_options().end() || option != "--" + std::string(known->second.dest)) out.shown_as[dest] = option;
  }
  for (auto it = out.shown_as.begin(); it != out.shown_as.end();) {
    // the default rendering ("--" + dest with '-') already says it
    std::string plain = "--" + it->first;
    for (char& c : plain)
      if (c == '_') c = '-';
    it = plain == it->second ? out.shown_as.erase(it) : std::next(it);
  }
  return out;
}

MegatronArguments megatron_arguments_from_command_line(const std::string& command_line) {
  return megatron_arguments_from_words(split_words(command_line, "--megatron-args", false), "--megatron-args");
}

MegatronArguments megatron_arguments_from_text(const std::string& text, const std::string& source) {
  return megatron_arguments_from_words(split_words(text, source, true), source);
}

UserRun read_megatron_args_file(const std::string& path) {
  const std::string text =
      read_input_file(path, {"no such Megatron-LM arguments file", "is a directory; pass an arguments file", "cannot be read"});
  UserRun run = user_run_from_megatron(megatron_arguments_from_text(text, path));
  run.format = "megatron-args";
  return run;
}

std::vector<Word> split_words(const std::string& text, const std::string& source, bool lines) {
  return refusing_in_one_line([&] { return split_words_checked(text, source, lines); });
}

MegatronArguments megatron_arguments_from_words(const std::vector<Word>& all, const std::string& source) {
  return refusing_in_one_line([&] { return megatron_arguments_from_words_checked(all, source); });
}

}  // namespace itertime::formats
