// training_techniques.cpp: the text forms of TrainingTechniques (see the header's invariants).
#include "common/training_techniques.hpp"

#include <vector>

#include "common/byte_size.hpp"
#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime {
namespace {

std::vector<std::string_view> split_tokens(std::string_view text) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('+', start);
    tokens.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return tokens;
}

// `text` as a message quotes it: control characters (a line break above all) escaped, so that the
// message stays one line whatever the recipe held.
std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (byte < 0x20 || byte == 0x7f)
      out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    else
      out += c;
  }
  return out;
}

[[noreturn]] void refuse(std::string_view text, const std::string& why) {
  throw UserError(
      "training recipe '" + printable(text) + "': " + why +
      " (give tokens sp, vocab (or vp), dopt, rc-sel or rc-full, ovl or ovl-<size>, opg, joined by '+' in any order)");
}

}  // namespace

bool TrainingTechniques::operator==(const TrainingTechniques& other) const {
  return sequence_parallel == other.sequence_parallel && vocab_parallel == other.vocab_parallel &&
         distributed_optimizer == other.distributed_optimizer && recompute == other.recompute &&
         overlap_gradient_reduction == other.overlap_gradient_reduction &&
         (!overlap_gradient_reduction || gradient_bucket_bytes == other.gradient_bucket_bytes) &&
         overlap_parameter_gather == other.overlap_parameter_gather;
}

constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}};
static_assert(enum_names_one_to_one(kRecomputeNames));

std::string to_string(Recompute recompute) { return name_of(kRecomputeNames, recompute, "recompute"); }

Recompute parse_recompute(std::string_view text) { return parse_named(kRecomputeNames, text, "recompute"); }

std::string recipe_text(const TrainingTechniques& t) {
  std::vector<std::string> tokens;
  if (t.sequence_parallel) tokens.push_back("sp");
  if (t.vocab_parallel) tokens.push_back("vp");
  if (t.distributed_optimizer) tokens.push_back("dopt");
  if (t.recompute == Recompute::kSelective) tokens.push_back("rc-sel");
  if (t.recompute == Recompute::kFull) tokens.push_back("rc-full");
  if (t.overlap_gradient_reduction) {
    tokens.push_back(t.gradient_bucket_bytes == kDefaultGradientBucketBytes ? std::string("ovl")
                                                                            : "ovl-" + format_byte_size(t.gradient_bucket_bytes));
  }
  if (t.overlap_parameter_gather) tokens.push_back("opg");
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? "+" : "") + tokens[i];
  return out;
}

TrainingTechniques parse_recipe_text(std::string_view text) {
  TrainingTechniques t;
  if (text.empty()) return t;
  // The technique each token set, by its canonical rank (sp, vp, dopt, rc, ovl, opg): a second token of
  // the same technique (sp+sp, rc-sel+rc-full, ovl+ovl-4M) is refused, naming both.
  std::string_view seen[6];
  for (std::string_view token : split_tokens(text)) {
    int technique = -1;
    if (token == "sp") {
      technique = 0;
      t.sequence_parallel = true;
    } else if (token == "vp" || token == "vocab") {
      technique = 1;
      t.vocab_parallel = true;
    } else if (token == "dopt") {
      technique = 2;
      t.distributed_optimizer = true;
    } else if (token == "rc-sel" || token == "rc-full") {
      technique = 3;
      t.recompute = token == "rc-sel" ? Recompute::kSelective : Recompute::kFull;
    } else if (token == "ovl" || token.substr(0, 4) == "ovl-") {
      technique = 4;
      t.overlap_gradient_reduction = true;
      if (token.size() > 3) {
        t.gradient_bucket_bytes = parse_byte_size(token.substr(4)).value_or(0);
        if (t.gradient_bucket_bytes < 1) refuse(text, "'" + printable(token) + "' is not a bucket size such as ovl-4M");
        const std::string canonical =
            t.gradient_bucket_bytes == kDefaultGradientBucketBytes ? "ovl" : "ovl-" + format_byte_size(t.gradient_bucket_bytes);
        if (token != canonical)
          refuse(text, "'" + printable(token) + "' is not in canonical form (write it as '" + canonical + "')");
      }
    } else if (token == "opg") {
      technique = 5;
      t.overlap_parameter_gather = true;
    } else {
      refuse(text, "unknown token '" + printable(token) + "'");
    }
    std::string_view& first = seen[technique];
    if (!first.empty()) {
      refuse(text, first == token ? "'" + printable(token) + "' given twice"
                                  : "'" + printable(first) + "' and '" + printable(token) + "' set the same technique; give one");
    }
    first = token;
  }
  if (t.overlap_parameter_gather && !(t.distributed_optimizer && t.overlap_gradient_reduction)) {
    refuse(text,
           "opg overlaps the distributed optimizer's bucketed all-gathers: it needs dopt and ovl too (e.g. 'dopt+ovl+opg')");
  }
  return t;
}

std::string recipe_label(const TrainingTechniques& techniques) {
  const std::string text = recipe_text(techniques);
  return text.empty() ? "plain" : text;
}

TrainingTechniques at_dp(TrainingTechniques techniques, int dp) {
  if (dp <= 1) {
    techniques.overlap_gradient_reduction = false;
    techniques.gradient_bucket_bytes = kDefaultGradientBucketBytes;
    techniques.overlap_parameter_gather = false;
  }
  return techniques;
}

}  // namespace itertime
