// megatron_arguments.cpp: Megatron-LM's arguments (by dest name) mapped to a UserRun
// (megatron_arguments.hpp). Names, defaults and the derived sizes follow megatron/training/arguments.py
// (NVIDIA/Megatron-LM, 639c08ab^: ffn_hidden_size and kv_channels when not given, num_query_groups with
// --group-query-attention, the fp8 recipes' names) and docs/formats.md says what each maps to.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <initializer_list>
#include <set>
#include <utility>

#include "common/errors.hpp"
#include "formats/megatron_arguments.hpp"
#include "predict/framework/megatron_layout_rules.hpp"

namespace itertime::formats {

std::string shown_name(const MegatronArguments& arguments, const std::string& key) {
  const auto it = arguments.shown_as.find(key);
  if (it != arguments.shown_as.end()) return it->second;
  std::string name = "--" + key;
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::string where_read(const MegatronArguments& arguments, const std::string& key) {
  const auto it = arguments.line_of.find(key);
  if (it == arguments.line_of.end() || it->second <= 0) return arguments.source + ": ";
  return arguments.source + ":" + std::to_string(it->second) + ": ";
}

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Reads keys, remembers which were used, and names each in its errors.
class Reader {
 public:
  Reader(const MegatronArguments& a, UserRun& run) : a_(a), run_(run) {}

  std::optional<std::string> text(const std::string& key) {
    const auto it = a_.values.find(key);
    if (it == a_.values.end()) return std::nullopt;
    if (used_.insert(key).second) run_.read.push_back(shown(key));
    return it->second;
  }
  std::string shown(const std::string& key) const {
    const auto it = a_.values.find(key);
    const std::string name = shown_name(a_, key);
    if (it == a_.values.end()) return name;
    if (a_.shown_as.count(key) && a_.shown_as.at(key).rfind("--", 0) != 0) return name + ": " + it->second;
    const bool flag_option = a_.shown_as.count(key) && it->second == "false";  // --disable-bias-linear is add_bias_linear false
    return it->second == "true" || flag_option ? name : name + " " + it->second;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw UserError(where_read(a_, key) + shown(key) + ": " + why);
  }
  std::optional<int64_t> integer(const std::string& key) {
    const std::optional<std::string> value = text(key);
    if (!value) return std::nullopt;
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(*value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value->size()) fail(key, "not a whole number");
    if (n < 1 || n > (int64_t{1} << 40)) fail(key, "must be a positive whole number");
    return n;
  }
  std::optional<double> number(const std::string& key) {
    const std::optional<std::string> value = text(key);
    if (!value) return std::nullopt;
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(*value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value->size() || !std::isfinite(x) || x <= 0) fail(key, "not a positive number");
    return x;
  }
  bool flag(const std::string& key, bool otherwise = false) {
    const std::optional<std::string> value = text(key);
    if (!value) return otherwise;
    const std::string v = lower(*value);
    if (v == "true" || v == "1") return true;
    if (v == "false" || v == "0") return false;
    fail(key, "not true or false");
  }
  int64_t required(const std::string& key, const std::string& what) {
    const std::optional<int64_t> value = integer(key);
    if (!value) {
      throw UserError(a_.source + ": no " + shown_name(a_, key) + " (" + what + "); give it");
    }
    return *value;
  }
  bool has(const std::string& key) const { return a_.values.count(key) > 0; }
  // Every key not used, as written; a log's false flags (options not given) are not options written.
  void list_unused() {
    for (const std::string& word : a_.stray) run_.not_understood.push_back(word);
    for (const auto& [key, value] : a_.values) {
      // A configuration's false is written by the user (listed); a log's false flag is an option not given.
      const auto shown_it = a_.shown_as.find(key);
      const bool configuration_key = shown_it != a_.shown_as.end() && shown_it->second.rfind("--", 0) != 0;
      if (used_.count(key) || (lower(value) == "false" && !configuration_key)) continue;
      run_.not_understood.push_back(shown(key));
    }
  }

 private:
  const MegatronArguments& a_;
  UserRun& run_;
  std::set<std::string> used_;
};

int to_int(int64_t n, Reader& r, const std::string& key) {
  if (n > (int64_t{1} << 30)) r.fail(key, "too large");
  return static_cast<int>(n);
}

}  // namespace

// Long because it reads Megatron-LM's options section after section in one reader (refusals, model, layout,
// precision, techniques, dropout, what is refused or read without effect) that all fill one run; one function
// per section would be the better form (it had one before a merge kept main's longer version).
static UserRun user_run_from_megatron_checked(const MegatronArguments& arguments) {
  UserRun run;
  run.source = arguments.source;
  run.format = "megatron-args";
  run.framework = predict::framework::Framework::kMegatronTe;
  Reader r(arguments, run);

  // Refused first: what the framework model cannot represent.
  if (const auto experts = r.text("num_experts"); experts && lower(*experts) != "none")
    r.fail("num_experts", "a mixture of experts; itertime models dense LLaMA models only");
  const std::string norm = r.text("normalization").value_or("LayerNorm");
  if (norm != "RMSNorm")
    throw UserError(where_read(arguments, "normalization") + "normalization " + norm +
                    (r.has("normalization") ? "" : " (Megatron-LM's default)") +
                    ": itertime models LLaMA (RMSNorm); give --normalization RMSNorm");
  const std::string position = r.text("position_embedding_type").value_or("learned_absolute");
  if (position != "rope")
    throw UserError(where_read(arguments, "position_embedding_type") + "position embedding " + position +
                    (r.has("position_embedding_type") ? "" : " (Megatron-LM's default)") +
                    ": itertime models LLaMA (rotary); give --position-embedding-type rope");
  if (!r.flag("swiglu"))
    throw UserError(arguments.source + ": no --swiglu: Megatron-LM's default GeLU MLP is not LLaMA's; give --swiglu");
  if (r.flag("add_bias_linear", true))
    throw UserError(arguments.source +
                    ": linear layers with biases (Megatron-LM's default): LLaMA has none; give --disable-bias-linear");
  if (const auto impl = r.text("transformer_impl"); impl && *impl != "transformer_engine")
    r.fail("transformer_impl", "the framework model is Megatron-Core with Transformer Engine (transformer_engine)");
  if (const auto divisible = r.integer("make_vocab_size_divisible_by"); divisible && *divisible != 128)
    r.fail("make_vocab_size_divisible_by", "the framework model pads the vocabulary to 128 x tp, Megatron-LM's default");

  // The model.
  LlamaSpec& m = run.model;
  m.num_layers = r.required("num_layers", "the model's layers");
  m.hidden_size = r.required("hidden_size", "the model's hidden size");
  m.num_heads = r.required("num_attention_heads", "the model's attention heads");
  if (const auto ffn = r.integer("ffn_hidden_size")) {
    m.intermediate_size = *ffn;
  } else {
    m.intermediate_size = static_cast<int64_t>((4 * m.hidden_size * 2 / 3) / 64) * 64;
    run.assumed.push_back("--ffn-hidden-size " + std::to_string(m.intermediate_size) +
                          " (Megatron-LM's default with --swiglu: 4 x hidden x 2/3, down to a multiple of 64)");
  }
  if (m.hidden_size % m.num_heads != 0)
    r.fail("num_attention_heads", "does not divide --hidden-size " + std::to_string(m.hidden_size));
  m.head_dim = m.hidden_size / m.num_heads;
  if (const auto kv = r.integer("kv_channels"); kv && *kv != m.head_dim)
    r.fail("kv_channels",
           "differs from hidden / heads = " + std::to_string(m.head_dim) + "; itertime's LLaMA has head_dim = hidden / heads");
  const std::optional<int64_t> groups = r.integer("num_query_groups");
  // A configuration (NeMo, Megatron-Bridge: TransformerConfig) has no switch: its num_query_groups is the KV heads.
  const bool config_groups =
      groups && arguments.shown_as.count("num_query_groups") && arguments.shown_as.at("num_query_groups").rfind("--", 0) != 0;
  const bool gqa = r.flag("group_query_attention", config_groups);
  if (gqa) {
    m.num_kv_heads = groups.value_or(1);  // Megatron-LM's default num_query_groups is 1
    if (!groups) run.assumed.push_back("--num-query-groups 1 (Megatron-LM's default with --group-query-attention)");
    if (m.num_heads % m.num_kv_heads != 0)
      r.fail("num_query_groups", "does not divide --num-attention-heads " + std::to_string(m.num_heads));
  } else {
    m.num_kv_heads = m.num_heads;
    if (groups && *groups != m.num_heads)
      run.assumed.push_back("--num-query-groups " + std::to_string(*groups) +
                            " without --group-query-attention: multi-head attention, as Megatron-LM ignores it");
  }
  if (const auto positions = r.integer("max_position_embeddings")) m.max_position_embeddings = *positions;
  m.rms_norm_eps = r.number("norm_epsilon").value_or(1e-5);  // Megatron-LM's default --norm-epsilon
  m.rope_theta = 10000;                                      // Megatron-LM's default --rotary-base
  if (const auto base = r.number("rotary_base")) m.rope_theta = *base;
  m.tie_word_embeddings = r.has("share_embeddings_and_output_weights") ? r.flag("share_embeddings_and_output_weights")
                                                                       : !r.flag("untie_embeddings_and_output_weights");
  // A log's block prints padded_vocab_size (the tokenizer's vocabulary padded to 128 x tp, which the
  // framework model pads the same way): used when the size itself is not given.
  const std::optional<int64_t> padded_vocab = r.integer("padded_vocab_size");
  if (const auto vocab = r.integer("vocab_size")) {
    m.vocab_size = *vocab;
  } else if (padded_vocab) {
    m.vocab_size = *padded_vocab;
    run.assumed.push_back("vocabulary " + std::to_string(*padded_vocab) +
                          " (the log's padded_vocab_size; the tokenizer's own size is not printed, and padding it again "
                          "to 128 x tp leaves it as it is)");
  } else {
    const std::string type = r.text("tokenizer_type").value_or("");
    const std::string model = lower(r.text("tokenizer_model").value_or(""));
    const auto names = [&](std::initializer_list<const char*> marks) {
      return std::any_of(marks.begin(), marks.end(), [&](const char* mark) { return model.find(mark) != std::string::npos; });
    };
    if (type == "HuggingFaceTokenizer" && names({"llama-3", "llama3", "llama_3"})) {
      m.vocab_size = 128256;
      run.assumed.push_back(
          "vocabulary 128256 (LLaMA 3's tokenizer, named by --tokenizer-model; the arguments give no --vocab-size)");
    } else if ((type == "HuggingFaceTokenizer" && names({"llama-2", "llama2", "llama_2"})) || type == "Llama2Tokenizer") {
      m.vocab_size = 32000;
      run.assumed.push_back("vocabulary 32000 (LLaMA 2's tokenizer; the arguments give no --vocab-size)");
    } else {
      // In the words of what the user wrote: a configuration file's keys, or Megatron-LM's options.
      const bool configuration = std::any_of(arguments.shown_as.begin(), arguments.shown_as.end(),
                                             [](const auto& shown) { return shown.second.rfind("--", 0) != 0; });
      throw UserError(arguments.source +
                      (configuration ? ": no vocabulary size: add model.vocab_size (or a LLaMA 2 or 3 tokenizer's "
                                       "name, tokenizer.tokenizer_model) to the file"
                                     : ": no vocabulary size: give --vocab-size, or --tokenizer-type HuggingFaceTokenizer "
                                       "with a LLaMA 2 or 3 --tokenizer-model"));
    }
  }
  m.name = arguments.source == "--megatron-args" ? "Megatron-LM arguments" : arguments.source;

  // The layout.
  ParallelConfig& c = run.config;
  c.tp = to_int(r.integer("tensor_model_parallel_size").value_or(1), r, "tensor_model_parallel_size");
  c.pp = to_int(r.integer("pipeline_model_parallel_size").value_or(1), r, "pipeline_model_parallel_size");
  c.cp = to_int(r.integer("context_parallel_size").value_or(1), r, "context_parallel_size");
  c.seq_len = to_int(r.required("seq_length", "the sequence length"), r, "seq_length");
  c.micro_batch = to_int(r.required("micro_batch_size", "the micro-batch size"), r, "micro_batch_size");
  // The pipeline split as Megatron-LM takes it (predict/framework/megatron_layout_rules.hpp checks it):
  // the embedding / loss counted as layers, or the first / last rank's own layer count.
  predict::framework::PipelineSplit& split = run.recipe.pipeline_split;
  split.given = true;
  split.account_for_embedding = r.flag("account_for_embedding_in_pipeline_split");
  split.account_for_loss = r.flag("account_for_loss_in_pipeline_split");
  split.first_stage_layers = r.integer("decoder_first_pipeline_num_layers").value_or(0);
  split.last_stage_layers = r.integer("decoder_last_pipeline_num_layers").value_or(0);
  const std::optional<int64_t> per_stage = r.integer("num_layers_per_virtual_pipeline_stage");
  const std::optional<int64_t> chunks = r.integer("num_virtual_stages_per_pipeline_rank");
  if (per_stage) {
    // arguments.py validate_args: vp = ((layers + accounted embedding and loss) / pp) / per_stage, and
    // the uneven first / last ranks need --num-virtual-stages-per-pipeline-rank instead.
    if (split.first_stage_layers > 0 || split.last_stage_layers > 0)
      r.fail("num_layers_per_virtual_pipeline_stage",
             "with --decoder-first/last-pipeline-num-layers Megatron-LM takes --num-virtual-stages-per-pipeline-rank");
    const int64_t accounted = m.num_layers + (split.account_for_embedding ? 1 : 0) + (split.account_for_loss ? 1 : 0);
    if (accounted % c.pp != 0 || (accounted / c.pp) % *per_stage != 0)
      r.fail("num_layers_per_virtual_pipeline_stage",
             "does not divide the " + std::to_string(accounted) + " layers" +
                 (accounted != m.num_layers ? " (with the accounted embedding / loss)" : "") + " over pp " +
                 std::to_string(c.pp));
    c.vp = static_cast<int>(accounted / (int64_t{c.pp} * *per_stage));
  }
  // A log's arguments block prints the derived virtual_pipeline_model_parallel_size too.
  if (const auto derived = r.integer("virtual_pipeline_model_parallel_size")) {
    if ((per_stage || chunks) && *derived != (chunks ? *chunks : c.vp))
      r.fail("virtual_pipeline_model_parallel_size", "contradicts the virtual stages the other options give");
    c.vp = to_int(*derived, r, "virtual_pipeline_model_parallel_size");
  }
  if (chunks) {
    if (per_stage && *chunks != c.vp)
      r.fail("num_virtual_stages_per_pipeline_rank", "contradicts " + r.shown("num_layers_per_virtual_pipeline_stage") + " (" +
                                                         std::to_string(c.vp) + " stages per rank)");
    c.vp = to_int(*chunks, r, "num_virtual_stages_per_pipeline_rank");
  }
  int world = arguments.world_size;
  if (const auto size = r.integer("world_size")) world = to_int(*size, r, "world_size");
  const int model_ranks = c.tp * c.pp * c.cp;
  // A log's block prints data_parallel_size (world / (tp x pp x cp)) beside world_size.
  if (const auto dp = r.integer("data_parallel_size")) {
    const int dp_ranks = to_int(*dp, r, "data_parallel_size");
    if (world > 0 && world != dp_ranks * model_ranks)
      r.fail("data_parallel_size",
             "contradicts world size " + std::to_string(world) + " / (tp x pp x cp = " + std::to_string(model_ranks) + ")");
    world = dp_ranks * model_ranks;
  }
  run.data_parallel_given = world > 0;
  if (world > 0) {
    if (world % model_ranks != 0)
      throw UserError(arguments.source + ": world size " + std::to_string(world) +
                      " is not a multiple of tp x pp x cp = " + std::to_string(model_ranks));
    c.dp = world / model_ranks;
  }
  const std::optional<int64_t> gbs = r.integer("global_batch_size");
  run.global_batch_given = gbs.has_value();
  c.global_batch = gbs ? to_int(*gbs, r, "global_batch_size") : c.micro_batch * c.dp;

  // Precision.
  using predict::framework::Fp8Recipe;
  auto& recipe = run.recipe;
  const bool bf16 = r.flag("bf16"), fp16 = r.flag("fp16");
  if (bf16 && fp16) throw UserError(arguments.source + ": both --bf16 and --fp16; give one");
  if (!bf16 && !fp16)
    throw UserError(arguments.source +
                    ": neither --bf16 nor --fp16: Megatron-LM would train in fp32, which the framework "
                    "model does not predict; give --bf16");
  recipe.precision = bf16 ? PrecisionName::kAmpBf16 : PrecisionName::kAmpFp16;
  if (const auto fp8 = r.text("fp8"); fp8 && lower(*fp8) != "none") {
    if (!bf16) r.fail("fp8", "fp8 GEMMs are predicted with bf16 parameters only; give --bf16");
    if (*fp8 != "hybrid" && *fp8 != "e4m3") r.fail("fp8", "not an fp8 format Megatron-LM knows (e4m3, hybrid)");
    if (*fp8 == "e4m3")
      run.assumed.push_back("--fp8-format e4m3 predicted as hybrid (e4m3 forward, e5m2 gradients): the GEMMs cost the same");
    recipe.precision = PrecisionName::kFp8;
    const std::string scaling = r.text("fp8_recipe").value_or("delayed");
    if (scaling == "delayed") {
      recipe.fp8_recipe = Fp8Recipe::kDelayed;
    } else if (scaling == "tensorwise") {
      recipe.fp8_recipe = Fp8Recipe::kCurrent;  // Float8CurrentScaling
    } else {
      r.fail("fp8_recipe", "itertime models delayed and tensorwise (current) scaling only");
    }
  }
  recipe.fp8_param_gather = r.flag("fp8_param_gather");
  if (recipe.fp8_param_gather && recipe.precision != PrecisionName::kFp8) r.fail("fp8_param_gather", "needs --fp8-format");
  recipe.tp_comm_overlap = r.flag("tp_comm_overlap");
  recipe.gradient_accumulation_fusion = r.flag("gradient_accumulation_fusion", true);

  // Techniques.
  TrainingTechniques& t = recipe.techniques;
  t.sequence_parallel = r.flag("sequence_parallel") && c.tp > 1;  // Megatron-LM turns it off at tp 1
  t.vocab_parallel = c.tp > 1;  // Megatron-LM's embedding and output layer are vocabulary-parallel (no switch)
  t.distributed_optimizer = r.flag("use_distributed_optimizer");
  t.overlap_gradient_reduction = r.flag("overlap_grad_reduce");
  t.overlap_parameter_gather = r.flag("overlap_param_gather");
  if (t.overlap_parameter_gather && !(t.distributed_optimizer && t.overlap_gradient_reduction))
    r.fail("overlap_param_gather", "needs --use-distributed-optimizer and --overlap-grad-reduce");
  // --recompute-activations: arguments.py validate_args sets recompute_granularity 'selective'.
  const bool recompute_activations = r.flag("recompute_activations");
  const std::optional<std::string> granularity_given = r.text("recompute_granularity");
  if (recompute_activations && granularity_given && *granularity_given != "selective")
    r.fail("recompute_granularity", "contradicts --recompute-activations (selective recompute)");
  const std::string granularity = granularity_given.value_or(recompute_activations ? "selective" : "none");
  const std::optional<std::string> method = r.text("recompute_method");
  const std::optional<int64_t> recompute_layers = r.integer("recompute_num_layers");
  if (granularity == "selective") {
    t.recompute = Recompute::kSelective;
    if (method && lower(*method) != "none") r.fail("recompute_method", "applies to --recompute-granularity full only");
  } else if (granularity == "full") {
    t.recompute = Recompute::kFull;
    const std::string how = method.value_or("uniform");
    if (!method) run.assumed.push_back("--recompute-method uniform (--recompute-granularity full gives none)");
    const int64_t chunk_layers = m.num_layers / (int64_t{c.pp} * c.vp);
    if (how == "block") {
      if (recompute_layers.value_or(0) < chunk_layers)
        r.fail("recompute_num_layers", "with --recompute-method block recomputes only some of each stage's " +
                                           std::to_string(chunk_layers) + " layers; itertime models every layer recomputed");
    } else if (how == "uniform") {
      if (recompute_layers && *recompute_layers != 1)
        run.assumed.push_back(r.shown("recompute_num_layers") +
                              " (uniform): predicted as every layer recomputed alone; the groups' memory differs slightly");
    } else {
      r.fail("recompute_method", "not uniform or block");
    }
  } else if (granularity != "none") {
    r.fail("recompute_granularity", "not selective or full");
  }
  // Dropout (transformer_config.py: hidden_dropout and attention_dropout default 0.1): its masks and kernels.
  const auto dropout_of = [&](const char* key) {
    const std::optional<std::string> value = r.text(key);
    if (!value) return 0.1;
    std::size_t used = 0;
    double p = -1;
    try {
      p = std::stod(*value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value->size() || !(p >= 0 && p < 1)) r.fail(key, "not a probability in [0, 1)");
    return p;
  };
  const double hidden_dropout = dropout_of("hidden_dropout"), attention_dropout = dropout_of("attention_dropout");
  recipe.dropout = hidden_dropout > 0 || attention_dropout > 0;
  if (recipe.dropout && (!r.has("hidden_dropout") || !r.has("attention_dropout")))
    run.assumed.push_back(
        "dropout 0.1 where not given (Megatron-LM's default; LLaMA trains with --hidden-dropout 0 "
        "--attention-dropout 0): predicted with dropout masks");
  // What changes the time or the memory and the framework model does not represent: refused in one line.
  for (const auto& [key, what] : std::initializer_list<std::pair<const char*, const char*>>{
           {"use_torch_fsdp2", "PyTorch FSDP2 (parameters sharded and gathered per layer)"},
           {"use_megatron_fsdp", "Megatron FSDP (parameters sharded and gathered per layer)"},
           {"use_custom_fsdp", "Megatron's custom FSDP"},
           {"cpu_offloading", "activations / weights offloaded to the CPU"},
           {"optimizer_cpu_offload", "the optimizer offloaded to the CPU"},
           {"enable_cuda_graph", "CUDA graphs"},
           {"external_cuda_graph", "CUDA graphs"}}) {
    if (r.flag(key))
      r.fail(key, std::string(what) +
                      " changes the time and the memory, which the framework model does not represent; "
                      "predict the run without it");
  }
  if (const auto graphs = r.text("cuda_graph_impl"); graphs && lower(*graphs) != "none")
    r.fail("cuda_graph_impl", "CUDA graphs change the time, which the framework model does not represent");
  // Read without effect: the framework model's attention is Transformer Engine's fused kernel, and it is Megatron-Core.
  r.text("use_mcore_models");
  r.text("use_flash_attn");
  r.text("attention_backend");
  r.text("tokenizer_type");
  r.text("tokenizer_model");
  for (const std::string& also : arguments.also_read) run.read.push_back(also);
  r.list_unused();
  if (run.data_parallel_given) {
    try {
      c.require_valid(m, 0);
    } catch (const UserError& error) {
      throw UserError(arguments.source + ": " + error.what());
    }
    // The one rule set: what Megatron-LM itself would refuse at start.
    const std::vector<std::string> broken =
        predict::framework::framework_violations(predict::framework::shape_of(m), c, run.recipe);
    if (!broken.empty()) throw UserError(arguments.source + ": Megatron-LM would refuse this run: " + broken.front());
  }
  return run;
}

UserRun user_run_from_megatron(const MegatronArguments& arguments) {
  return refusing_in_one_line([&] { return user_run_from_megatron_checked(arguments); });
}

}  // namespace itertime::formats
