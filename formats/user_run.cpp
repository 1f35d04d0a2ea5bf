// user_run.cpp: a UserRun completed with its data-parallel size (user_run.hpp).
#include "formats/user_run.hpp"

#include "common/errors.hpp"
#include "predict/framework/megatron_layout_rules.hpp"

namespace itertime::formats {

std::string one_line(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

UserRun with_data_parallel(UserRun run, int dp, const std::string& why) {
  if (dp < 1) throw UserError(why + ": the data-parallel size must be positive");
  run.config.dp = dp;
  if (!run.global_batch_given)
    run.config.global_batch = (run.batch_per_dp_rank > 0 ? run.batch_per_dp_rank : run.config.micro_batch) * dp;
  run.data_parallel_given = true;
  try {
    run.config.require_valid(run.model, 0);
  } catch (const UserError& error) {
    throw UserError(run.source + " with " + why + ": " + error.what());
  }
  if (run.framework == predict::framework::Framework::kMegatronTe) {  // the one rule set (megatron_layout_rules.hpp)
    const std::vector<std::string> broken =
        predict::framework::framework_violations(predict::framework::shape_of(run.model), run.config, run.recipe);
    if (!broken.empty()) throw UserError(run.source + " with " + why + ": Megatron-LM would refuse this run: " + broken.front());
  }
  return run;
}

}  // namespace itertime::formats
