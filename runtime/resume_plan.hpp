// resume_plan.hpp: the collective start of a resumable calibration stage (comm, ops, groundtruth),
// written once: world rank 0 creates or resumes the stage's HDF5 store, reads the keys already in it
// and flags each planned item (point, configuration, stage trace) as present; the flags reach every
// rank, so that all ranks skip the same items.
// Invariants:
//  - Collective over MPI_COMM_WORLD; only world rank 0 opens the file (ResumePlan::store is null on the
//    other ranks), and it does so before any measurement.
//  - A UserError while opening, reading the keys or running the stage's own on-open step stops every
//    rank as a CollectiveUserError with rank 0's message (so all exit 2), and no flags are broadcast.
//  - present[i] is 1 exactly when planned_keys[i] is among the keys read, identical on every rank.
//  - Reading the keys (with the trims it does) and the on-open step write in one store transaction: they
//    reach the file in one commit, or, when one of them throws, not at all (common/h5store.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/h5store.hpp"

namespace itertime {

// Where a stage writes, and how (its -o, --force and --resume options, and /meta for a new file).
struct StoreTarget {
  std::string path;
  bool force = false;
  bool resume = false;
  std::map<std::string, std::string> provenance;
};

struct ResumePlan {
  std::unique_ptr<h5::Store> store;  // world rank 0: the open store; other ranks: null
  std::vector<uint8_t> present;      // per planned key, on every rank: 1 when already stored

  std::size_t present_count() const;
};

// Reads the keys of a store's complete items (and trims a partly written tail; see
// common/h5_parent_rows.hpp), e.g. store::existing_comm_keys.
using ExistingKeys = std::function<std::set<std::string>(h5::Store&)>;
// A stage's own step on rank 0 once the keys are read: stamp /meta, read what else it resumes from.
using OnStoreOpen = std::function<void(h5::Store&)>;

// Collective over MPI_COMM_WORLD (see the invariants above).
ResumePlan open_resume_plan(const StoreTarget& target, const std::vector<std::string>& planned_keys,
                            const ExistingKeys& existing_keys, const OnStoreOpen& on_open = {});

// World rank 0's `flags`, on every rank (collective over MPI_COMM_WORLD; every rank passes a vector of
// the same size).
std::vector<uint8_t> broadcast_flags(std::vector<uint8_t> flags);

}  // namespace itertime
