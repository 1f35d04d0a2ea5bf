// store_meta.hpp: the /meta attributes of an itertime store, their names defined once, and /meta read
// once into a typed record (docs/schema.md, "/meta").
// Invariants:
//  - Every /meta attribute itertime writes or reads is named by one constant in `meta_key`; no other
//    file spells an attribute's name.
//  - read_store_meta reads /meta once. An absent attribute leaves its field at the default named beside
//    it (older files lack some); a present one that does not parse is a UserError naming the file, the
//    attribute and its text, so a damaged file is never read as a default.
//  - Text stays here: counts are parsed whole (no trailing characters), backend and attention kernel
//    into their enums; the rest of the code sees typed fields only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/attention.hpp"
#include "common/dtype.hpp"
#include "common/h5store.hpp"

namespace itertime::store {

namespace meta_key {
// Written by Store::create (h5store.cpp) and its resume.
inline constexpr const char* kSchemaVersion = "schema_version";
inline constexpr const char* kResumedUtc = "resumed_utc";
inline constexpr const char* kResumedArgv = "resumed_argv";
// Provenance, written once by the command that creates the file (launcher/provenance.cpp).
inline constexpr const char* kItertimeVersion = "itertime_version";
inline constexpr const char* kGitRevision = "git_revision";
inline constexpr const char* kCreatedUtc = "created_utc";
inline constexpr const char* kArgv = "argv";
inline constexpr const char* kHostnames = "hostnames";
inline constexpr const char* kWorldSize = "world_size";
inline constexpr const char* kNumNodes = "num_nodes";
inline constexpr const char* kCpuCoresPerNode = "cpu_cores_per_node";
inline constexpr const char* kBackend = "backend";
inline constexpr const char* kDeviceNames = "device_names";
inline constexpr const char* kHardware = "hardware";
inline constexpr const char* kMpiVersion = "mpi_version";
inline constexpr const char* kHdf5Version = "hdf5_version";
inline constexpr const char* kCudaVersion = "cuda_version";
inline constexpr const char* kNcclVersion = "nccl_version";
inline constexpr const char* kTorchVersion = "torch_version";
// calibrate comm (commbench/comm_bench.cpp).
inline constexpr const char* kCommWorldSize = "comm_world_size";
inline constexpr const char* kCommNumNodes = "comm_num_nodes";
inline constexpr const char* kCommNodeOfRank = "comm_node_of_rank";
inline constexpr const char* kCommHostnames = "comm_hostnames";
inline constexpr const char* kCommBackend = "comm_backend";
// calibrate ops and groundtruth (calibrate/).
inline constexpr const char* kOpsJob = "ops_job";
inline constexpr const char* kOpsComputeThreads = "ops_compute_threads";
inline constexpr const char* kGroundTruthJob = "groundtruth_job";
inline constexpr const char* kGroundTruthModel = "groundtruth_model";
inline constexpr const char* kGroundTruthInFlight = "groundtruth_in_flight";
inline constexpr const char* kGroundTruthNodeOfRank = "groundtruth_node_of_rank";  // the ground-truth job's nodes
inline constexpr const char* kAttention = "attention";
inline constexpr const char* kLibtorchVersion = "libtorch_version";
}  // namespace meta_key

// What prediction and validation need of /meta, typed. Defaults are what an absent attribute means.
struct StoreMeta {
  std::optional<Backend> backend;             // absent, "" or "unknown": not recorded
  std::optional<AttentionKernel> attention;   // resolved (eager | sdpa); absent: no LibTorch stage ran yet
  std::string libtorch_version;               // "" when absent
  std::string hardware;                       // data/hardware description; "" for none (also "none" in the file)
  int64_t world_size = 0;                     // 0 when absent
  int64_t num_nodes = 0;                      // 0 when absent
  int64_t cpu_cores_per_node = 0;             // 0 when absent
  int64_t ops_compute_threads = 0;            // 0 when absent (calibrate ops not run)
  std::string groundtruth_model;              // "" when absent
  std::vector<int> comm_node_of_rank;         // calibrate comm's node index per world rank; empty when absent
  std::vector<int> groundtruth_node_of_rank;  // calibrate groundtruth's (its last run's); empty when absent
};

// Ranks per node of the ground-truth job: from groundtruth_node_of_rank when recorded (ranks_per_node_of),
// else from the provenance of the job that created the file (world_size / num_nodes, rounded up when the
// nodes hold unequal counts; files from before it was recorded); 0 when it ran on one node or the file
// does not say. A configuration of fewer ranks than the job runs on its first ranks, so this is how every
// configuration sat on nodes.
int64_t job_ranks_per_node(const StoreMeta& meta);

// Reads /meta once (see the invariants). Throws UserError for an attribute whose text does not parse.
StoreMeta read_store_meta(const h5::Store& store);
// The same from already-rendered attributes (Store::meta()); `file` names the store in errors.
StoreMeta parse_store_meta(const std::map<std::string, std::string>& attributes, const std::string& file);

}  // namespace itertime::store
