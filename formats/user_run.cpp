// user_run.cpp: a UserRun completed with its data-parallel size (user_run.hpp).
#include "formats/user_run.hpp"

#include "common/errors.hpp"

namespace itertime::formats {

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
  return run;
}

}  // namespace itertime::formats
