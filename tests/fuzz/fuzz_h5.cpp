// fuzz_h5.cpp: damaged calibration files given to the HDF5 readers (h5::Store::open, list_datasets,
// meta, read_groundtruth_rows, read_comm_records, read_ops_records, read_groundtruth_records).
// A small valid store (comm points, op signatures, timings, two stage traces, ground truth with rank
// and round rows) is written once in a TempDir; each input is a copy truncated at a random length, with
// random bytes flipped, a random range overwritten, or 8-byte words replaced by huge integers (sizes and
// dimensions), written to the TempDir and read with the library's readers, read-only.
// Invariants checked per input: the readers return or throw a one-line UserError, and leave the damaged
// file unchanged; a crash (in our code or inside libhdf5), a hang (> 20 s), an InternalError or another
// exception fails. The seed is written by today's writer (HDF5 1.8 format with metadata checksums,
// Fletcher-32 per table chunk, see common/h5store.hpp); stores of the earlier format are not fuzzed. The
// worker's address space is capped at 4 GiB. The run is a fixed number of inputs, ITERTIME_FUZZ_H5_INPUTS
// or else ITERTIME_FUZZ_INPUTS (default 8,000, about 60 s on the 2-core development machine), so every
// machine runs the same inputs.
#include <gtest/gtest.h>

#include <H5Cpp.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/comm_store.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/ops_store.hpp"
#include "fuzz_common.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::fuzz {
namespace {

using namespace itertime::store;

void write_store(const std::string& path) {
  h5::Store store = h5::Store::create(path, false, {{"argv", "fuzz"}, {"backend", "cpu"}});
  for (int i = 0; i < 3; ++i) {
    CommRow row{};
    h5::set_string(row.collective, i == 2 ? "all_gather" : "all_reduce");
    h5::set_string(row.dtype, "fp32");
    row.group_size = 2;
    h5::set_string(row.layout, "consecutive");
    h5::set_string(row.span, "intra-node");
    h5::set_string(row.mode, "latency");
    h5::set_string(row.backend, "mpi");
    row.bytes = int64_t{1024} << i;
    row.count = row.bytes / 4;
    row.time_us_median = 10.0 + i;
    append_comm_point(store, row, {10.0, 11.0, 12.0});
  }
  OpSignatureRow signature{};
  h5::set_string(signature.name, "aten::mm");
  h5::set_string(signature.signature, "aten::mm(fp32[2,2], fp32[2,2])->fp32");
  h5::set_string(signature.input_dtypes, "fp32,fp32");
  h5::set_string(signature.output_dtype, "fp32");
  signature.flops = 16;
  store.table<OpSignatureRow>(kOpSignatures).append(signature);
  OpTimingRow timing{};
  timing.active_ranks = 2, timing.time_us_median = 3.5, timing.ok = 1;
  h5::set_string(timing.backend, "cpu");
  store.table<OpTimingRow>(kOpTimings).append(timing);
  for (int s = 0; s < 2; ++s) {
    OpStageRow stage{};
    h5::set_string(stage.stage_key, "tiny/tp1/pp2/s" + std::to_string(s) + "/mbs1/seq64/fp32/aware");
    h5::set_string(stage.model, "tiny");
    stage.tp = 1, stage.pp = 2, stage.stage = s, stage.micro_batch = 1, stage.seq_len = 64;
    h5::set_string(stage.precision, "fp32");
    h5::set_string(stage.variant, "aware");
    stage.local_params = 100 + s;
    OpSequenceRow sequence{};
    h5::set_string(sequence.phase, "forward");
    sequence.count = 3;
    OpCommRow comm{};
    h5::set_string(comm.phase, "backward");
    h5::set_string(comm.kind, "pp_send_backward");
    h5::set_string(comm.dtype, "fp32");
    comm.bytes = 64, comm.count = 1;
    append_stage(store, stage, {sequence}, {comm});
  }
  for (int c = 0; c < 2; ++c) {
    GroundTruthRow row{};
    const std::string key = "tiny/dp" + std::to_string(2 - c) + "-tp1-pp" + std::to_string(1 + c) + "/mbs1/gbs8/seq64/fp32";
    h5::set_string(row.key, key);
    h5::set_string(row.model, "tiny");
    row.dp = 2 - c, row.tp = 1, row.pp = 1 + c, row.cp = 1, row.vp = 1;
    row.micro_batch = 1, row.global_batch = 8, row.seq_len = 64, row.num_micro_batches = 4;
    h5::set_string(row.precision, "fp32");
    h5::set_string(row.backend, "cpu");
    h5::set_string(row.status, "ok");
    row.time_us_median = 1000.0 + c;
    row.rounds_run = 2, row.rounds_counted = 2;
    GroundTruthRankRow rank{};
    h5::set_string(rank.key, key);
    rank.total_us = 1000.0;
    GroundTruthRoundRow round{};
    h5::set_string(round.key, key);
    round.samples = 2;
    h5::set_string(round.verdict, "counted");
    append_groundtruth(store, row, {1000.0, 1001.0}, {rank, rank}, {round, round});
  }
}

// A damaged copy of `file`: truncated, bytes flipped, a range overwritten, or words made huge.
std::string damage(Rng& rng, const std::string& file) {
  std::string out = file;
  const unsigned kind = static_cast<unsigned>(rng.below(4));
  if (kind == 0) {
    out.resize(rng.below(out.size()));
    return out;
  }
  const std::size_t edits = 1 + rng.below(rng.chance(60) ? 2 : 16);
  for (std::size_t e = 0; e < edits; ++e) {
    const std::size_t at = rng.below(out.size());
    if (kind == 1) {
      out[at] ^= static_cast<char>(1u << rng.below(8));
    } else if (kind == 2) {
      const std::size_t n = std::min<std::size_t>(out.size() - at, 1 + rng.below(64));
      const char fill = rng.chance(30) ? '\0' : rng.chance(30) ? '\xff' : 'r';
      for (std::size_t k = 0; k < n; ++k) out[at + k] = fill == 'r' ? static_cast<char>(rng.below(256)) : fill;
    } else {
      static const std::vector<uint64_t> kHuge = {
          0xffffffffffffffffull, 0x7fffffffffffffffull, 0x100000000ull, 0x80000000ull, 0xffffffffull, 1ull << 40, 0};
      const uint64_t value = rng.pick(kHuge);
      const std::size_t aligned = (at / 8) * 8;
      if (aligned + 8 <= out.size()) std::memcpy(&out[aligned], &value, 8);
    }
  }
  if (rng.chance(10)) out.resize(rng.below(out.size() + 1));
  return out;
}

void read_everything(const std::string& path) {
  h5::Store store = h5::Store::open(path, /*writable=*/false);
  (void)store.meta();
  (void)store.list_datasets();
  (void)read_groundtruth_rows(store);
  (void)read_comm_records(store);
  (void)read_ops_records(store);
  (void)read_groundtruth_records(store);
}

TEST(Fuzz, Hdf5Readers) {
  testing::TempDir folder;
  const std::string seed_path = folder.file("seed.h5");
  write_store(seed_path);
  read_everything(seed_path);  // the undamaged file reads
  const std::string original = read_file(seed_path);
  ASSERT_GT(original.size(), 1000u);
  std::printf("[fuzz] hdf5: seed store of %zu bytes\n", original.size());
  testing::TempDir work;
  const std::string path = folder.file("damaged.h5");
  const uint64_t seed = fuzz_seed();
  auto input_of = [&](int64_t index) {
    Rng rng = input_rng(seed, "hdf5", static_cast<uint64_t>(index));
    return damage(rng, original);
  };
  int64_t ran = 0;
  // Runs in blocks of forked workers until the input count is spent.
  Tally total;
  const int64_t first = fuzz_first();
  const int64_t limit = env_int("ITERTIME_FUZZ_H5_INPUTS", fuzz_inputs(8000));
  while (ran < limit) {
    const int64_t block = std::min<int64_t>(500, limit - ran);
    const Tally tally = run_isolated(first + ran, block, 20.0, work.path().string(), [&](int64_t index) {
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer reserves terabytes of address space
      // A damaged dimension makes a reader allocate rows x row size (see the bad_alloc class below): cap
      // the worker's address space so that such a file fails fast instead of exhausting the machine.
      const rlimit cap{rlim_t{4} << 30, rlim_t{4} << 30};
      setrlimit(RLIMIT_AS, &cap);
#endif
      const std::string bytes = input_of(index);
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << bytes;
      }
      Verdict verdict = classify([&] { read_everything(path); });
      if (read_file(path) != bytes) verdict = {Result::kOther, "reading changed the file"};
      return verdict;
    });
    ran += tally.inputs;
    total.inputs += tally.inputs;
    total.accepted += tally.accepted;
    total.user_error += tally.user_error;
    total.other += tally.other;
    total.crash += tally.crash;
    total.hang += tally.hang;
    total.seconds += tally.seconds;
    if (tally.slowest_seconds > total.slowest_seconds) {
      total.slowest_seconds = tally.slowest_seconds;
      total.slowest_index = tally.slowest_index;
    }
    for (const auto& f : tally.failures)
      if (total.failures.size() < 10) total.failures.push_back(f);
  }
  report("hdf5", total, [&](int64_t index) {
    // The input is a whole damaged file: describe how it differs from the seed instead.
    const std::string bytes = input_of(index);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < std::min(bytes.size(), original.size()); ++i) differ += bytes[i] != original[i];
    return "damaged copy of " + std::to_string(original.size()) + " bytes: " + std::to_string(bytes.size()) + " bytes long, " +
           std::to_string(differ) + " bytes differ";
  });
  EXPECT_TRUE(empty_dir(work.path()));
  EXPECT_EQ(total.failed(), 0);
}

}  // namespace
}  // namespace itertime::fuzz
