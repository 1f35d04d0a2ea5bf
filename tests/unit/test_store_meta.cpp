// Unit tests of common/store_meta: /meta read once into a typed record. Absent attributes read as the
// documented defaults (older files); present ones parse into enums and counts, and text that does not
// parse is a UserError naming the file and the attribute (never silently a default); a round trip
// through a real store reads what the provenance and the stages wrote, integer attributes included.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <tuple>

#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "common/store_meta.hpp"
#include "temp_dir.hpp"

namespace itertime::store {
namespace {

std::string error_of(const std::map<std::string, std::string>& attributes) {
  try {
    parse_store_meta(attributes, "cal.h5");
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

// Every field of a StoreMeta as one comparable value (what each test expects, field by field).
using Fields = std::tuple<std::optional<Backend>, std::optional<AttentionKernel>, std::string, std::string, int64_t, int64_t,
                          int64_t, int64_t, std::string>;
Fields fields(const StoreMeta& m) {
  return {m.backend,   m.attention,          m.libtorch_version,    m.hardware,         m.world_size,
          m.num_nodes, m.cpu_cores_per_node, m.ops_compute_threads, m.groundtruth_model};
}

TEST(StoreMeta, AbsentAttributesReadAsTheirDefaults) {
  EXPECT_EQ(fields(parse_store_meta({{meta_key::kSchemaVersion, "6"}}, "cal.h5")),
            Fields(std::nullopt, std::nullopt, "", "", 0, 0, 0, 0, ""));
}

TEST(StoreMeta, PresentAttributesParseIntoTypes) {
  const StoreMeta meta = parse_store_meta({{meta_key::kBackend, "cuda"},
                                           {meta_key::kAttention, "sdpa"},
                                           {meta_key::kLibtorchVersion, "2.6.0"},
                                           {meta_key::kHardware, "h100-sxm"},
                                           {meta_key::kWorldSize, "16"},
                                           {meta_key::kNumNodes, "2"},
                                           {meta_key::kCpuCoresPerNode, "112"},
                                           {meta_key::kOpsComputeThreads, "4"},
                                           {meta_key::kGroundTruthModel, "data/models/tiny.json"}},
                                          "cal.h5");
  EXPECT_EQ(fields(meta),
            Fields(Backend::kCuda, AttentionKernel::kSdpa, "2.6.0", "h100-sxm", 16, 2, 112, 4, "data/models/tiny.json"));
}

// Where calibrate comm's ranks sat (issue 35): the comm model places its tables with it; the job's ranks
// per node (its provenance) is how ground truth sat on nodes.
TEST(StoreMeta, NodesOfTheCommCalibrationAndTheJob) {
  EXPECT_EQ(parse_store_meta({{meta_key::kCommNodeOfRank, "0,0,1,1"}}, "cal.h5").comm_node_of_rank,
            (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(parse_store_meta({}, "cal.h5").comm_node_of_rank.empty());
  const std::string bad = error_of({{meta_key::kCommNodeOfRank, "0,a"}});
  EXPECT_NE(bad.find("cal.h5"), std::string::npos) << bad;
  EXPECT_NE(bad.find("comm_node_of_rank"), std::string::npos) << bad;
  EXPECT_EQ(job_ranks_per_node(parse_store_meta({{meta_key::kWorldSize, "8"}, {meta_key::kNumNodes, "2"}}, "cal.h5")), 4);
  EXPECT_EQ(job_ranks_per_node(parse_store_meta({{meta_key::kWorldSize, "6"}, {meta_key::kNumNodes, "4"}}, "cal.h5")), 2);
  EXPECT_EQ(job_ranks_per_node(parse_store_meta({{meta_key::kWorldSize, "8"}, {meta_key::kNumNodes, "1"}}, "cal.h5")), 0);
  EXPECT_EQ(job_ranks_per_node(parse_store_meta({}, "cal.h5")), 0);
  // The ground-truth job's own nodes, when recorded, over the provenance of the command that made the file.
  const StoreMeta recorded = parse_store_meta(
      {{meta_key::kWorldSize, "4"}, {meta_key::kNumNodes, "1"}, {meta_key::kGroundTruthNodeOfRank, "0,0,0,1,1,1"}}, "cal.h5");
  EXPECT_EQ(recorded.groundtruth_node_of_rank, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(job_ranks_per_node(recorded), 3);
  EXPECT_EQ(job_ranks_per_node(parse_store_meta({{meta_key::kGroundTruthNodeOfRank, "0,0"}}, "cal.h5")), 0);
  EXPECT_NE(error_of({{meta_key::kGroundTruthNodeOfRank, "1;2"}}).find("groundtruth_node_of_rank"), std::string::npos);
}

TEST(StoreMeta, NoneAndUnknownMeanNotRecorded) {
  EXPECT_EQ(parse_store_meta({{meta_key::kHardware, "none"}}, "cal.h5").hardware, "");
  EXPECT_FALSE(parse_store_meta({{meta_key::kBackend, "unknown"}}, "cal.h5").backend.has_value());
  EXPECT_FALSE(parse_store_meta({{meta_key::kBackend, ""}}, "cal.h5").backend.has_value());
}

TEST(StoreMeta, TextThatDoesNotParseIsAUserErrorNamingFileAndAttribute) {
  for (const char* bad : {"", "4x", "-1", "1e3", " 4", "99999999999999999999"}) {
    const std::string message = error_of({{meta_key::kWorldSize, bad}});
    EXPECT_NE(message.find("cal.h5"), std::string::npos) << bad;
    EXPECT_NE(message.find("world_size"), std::string::npos) << bad;
  }
  const std::string backend = error_of({{meta_key::kBackend, "tpu"}});
  EXPECT_NE(backend.find("/meta backend"), std::string::npos) << backend;
  EXPECT_NE(backend.find("tpu"), std::string::npos) << backend;
  const std::string attention = error_of({{meta_key::kAttention, "flash"}});
  EXPECT_NE(attention.find("/meta attention"), std::string::npos) << attention;
}

TEST(StoreMeta, ReadsWhatAStoreHolds) {
  itertime::testing::TempDir dir;
  const std::string path = (dir.path() / "meta.h5").string();
  {
    h5::Store store = h5::Store::create(
        path, /*force=*/false, {{meta_key::kBackend, "cpu"}, {meta_key::kWorldSize, "4"}, {meta_key::kHardware, "none"}});
    store.set_meta(meta_key::kOpsComputeThreads, static_cast<int64_t>(2));  // an integer attribute
    store.set_meta(meta_key::kAttention, "eager");
  }
  const StoreMeta meta = read_store_meta(h5::Store::open(path, /*writable=*/false));
  EXPECT_EQ(meta.backend, Backend::kCpu);
  EXPECT_EQ(meta.world_size, 4);
  EXPECT_EQ(meta.ops_compute_threads, 2);
  EXPECT_EQ(meta.attention, AttentionKernel::kEager);
  EXPECT_EQ(meta.hardware, "");
}

}  // namespace
}  // namespace itertime::store
