// resume_plan.cpp: open_resume_plan (runtime/resume_plan.hpp): the store on rank 0, the present-flags
// on every rank.
#include "runtime/resume_plan.hpp"

#include <mpi.h>

#include <algorithm>

#include "runtime/mpi_session.hpp"

namespace itertime {

std::size_t ResumePlan::present_count() const { return static_cast<std::size_t>(std::count(present.begin(), present.end(), 1)); }

ResumePlan open_resume_plan(const StoreTarget& target, const std::vector<std::string>& planned_keys,
                            const ExistingKeys& existing_keys, const OnStoreOpen& on_open) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  ResumePlan plan;
  plan.present.assign(planned_keys.size(), 0);
  on_root_collectively(world_rank, [&] {
    plan.store =
        std::make_unique<h5::Store>(h5::Store::create_or_resume(target.path, target.force, target.resume, target.provenance));
    // The trims of existing_keys and on_open's notes reach the file in one commit (h5store.hpp).
    const h5::Store::Transaction opening(*plan.store);
    const std::set<std::string> keys = existing_keys(*plan.store);
    for (std::size_t i = 0; i < planned_keys.size(); ++i) plan.present[i] = keys.count(planned_keys[i]) ? 1 : 0;
    if (on_open) on_open(*plan.store);
  });
  plan.present = broadcast_flags(std::move(plan.present));
  return plan;
}

std::vector<uint8_t> broadcast_flags(std::vector<uint8_t> flags) {
  MPI_Bcast(flags.data(), static_cast<int>(flags.size()), MPI_UINT8_T, 0, MPI_COMM_WORLD);
  return flags;
}

}  // namespace itertime
