// fault_rows: the row keys of an itertime store, for the fault harness (launcher/scripts/fault-harness.sh),
// which compares them with those of an uninterrupted run. Read-only.
//   fault_rows FILE
// Prints one tab-separated line per row: TABLE, KEY. A key names what a row is, never what it measured,
// so equal runs print equal lines:
//   /comm/points               the point's key (comm_row_key); /comm/samples_us: "KEY n=COUNT" per point
//   /ops/signatures            the signature text; /ops/timings: "SIGNATURE@ACTIVE_RANKS/BACKEND"
//   /ops/stages                the stage key; /ops/sequences and /ops/comms: their row's identifying fields
//   /groundtruth/configs       the configuration key; /groundtruth/ranks: "KEY|RANK"
// and, for ground truth, "status<TAB>KEY<TAB>STATUS" per configuration (a kill in flight records one
// failed: not a lost row; the harness counts those apart). Child rows no parent points at print as
// "TABLE<TAB>ORPHAN n=COUNT" (extra rows). A span that overlaps another, leaves a gap or points past its
// table, a rank or round row carrying another configuration's key, and a file that does not read print
// "damage<TAB>WHAT" (exit status 1).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/comm_store.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/ops_store.hpp"

namespace {

using namespace itertime;

int damage_count = 0;

void line(const std::string& table, const std::string& key) { std::printf("%s\t%s\n", table.c_str(), key.c_str()); }

void damage(const std::string& what) {
  ++damage_count;
  line("damage", what);
}

struct Span {
  int64_t offset, count;
  std::string key;
};

// Checks that `spans` tile [0, end) of a child table of `rows` rows without overlap; the rows past the
// last span are orphans.
void check_spans(const std::string& table, std::vector<Span> spans, std::size_t rows) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.offset < b.offset; });
  int64_t end = 0;
  for (const Span& span : spans) {
    if (span.count == 0) continue;
    if (span.offset != end)
      damage(table + ": span of " + span.key + " starts at " + std::to_string(span.offset) + ", not " + std::to_string(end));
    end = std::max(end, span.offset + span.count);
  }
  if (static_cast<std::size_t>(end) > rows)
    damage(table + ": spans end at " + std::to_string(end) + " past its " + std::to_string(rows) + " rows");
  if (rows > static_cast<std::size_t>(end)) line(table, "ORPHAN n=" + std::to_string(rows - static_cast<std::size_t>(end)));
}

template <typename Row>
std::vector<Row> rows_of(h5::Store& store, const char* path) {
  return store.exists(path) ? store.table<Row>(path).read_all() : std::vector<Row>{};
}

std::size_t samples_in(h5::Store& store, const char* path) { return store.exists(path) ? store.samples(path).size() : 0; }

void comm(h5::Store& store) {
  const auto points = rows_of<store::CommRow>(store, store::kCommTable);
  std::vector<Span> spans;
  for (const auto& row : points) {
    const std::string key = store::comm_row_key(row);
    line(store::kCommTable, key);
    line(store::kCommSamples, key + " n=" + std::to_string(row.samples_count));
    spans.push_back({row.samples_offset, row.samples_count, key});
  }
  check_spans(store::kCommSamples, spans, samples_in(store, store::kCommSamples));
}

void ops(h5::Store& store) {
  std::map<int64_t, std::string> signature_of;
  for (const auto& row : rows_of<store::OpSignatureRow>(store, store::kOpSignatures)) {
    const std::string text = h5::get_string(row.signature);
    if (signature_of.count(row.id)) damage(std::string(store::kOpSignatures) + ": id " + std::to_string(row.id) + " twice");
    signature_of[row.id] = text;
    line(store::kOpSignatures, text);
  }
  const auto signature = [&](int64_t id) {
    const auto found = signature_of.find(id);
    if (found == signature_of.end()) {
      damage("signature id " + std::to_string(id) + " is not in " + store::kOpSignatures);
      return std::string("?");
    }
    return found->second;
  };
  for (const auto& row : rows_of<store::OpTimingRow>(store, store::kOpTimings)) {
    line(store::kOpTimings,
         signature(row.signature_id) + "@" + std::to_string(row.active_ranks) + "/" + h5::get_string(row.backend));
  }
  const auto sequences = rows_of<store::OpSequenceRow>(store, store::kOpSequences);
  const auto comms = rows_of<store::OpCommRow>(store, store::kOpComms);
  std::vector<Span> sequence_spans, comm_spans;
  for (const auto& stage : rows_of<store::OpStageRow>(store, store::kOpStages)) {
    const std::string key = h5::get_string(stage.stage_key);
    line(store::kOpStages, key);
    sequence_spans.push_back({stage.sequence_offset, stage.sequence_count, key});
    comm_spans.push_back({stage.comm_offset, stage.comm_count, key});
  }
  for (const auto& row : sequences) {
    line(store::kOpSequences, h5::get_string(row.stage_key) + "|" + h5::get_string(row.phase) + "|" +
                                  signature(row.signature_id) + "|" + std::to_string(row.count));
  }
  for (const auto& row : comms) {
    line(store::kOpComms, h5::get_string(row.stage_key) + "|" + h5::get_string(row.phase) + "|" + h5::get_string(row.kind) + "|" +
                              h5::get_string(row.dtype) + "|" + std::to_string(row.bytes) + "|" + std::to_string(row.count));
  }
  check_spans(store::kOpSequences, sequence_spans, sequences.size());
  check_spans(store::kOpComms, comm_spans, comms.size());
}

// Each row of the child table `table` (`rows`) in the span a configuration points at, in order, to
// `each`, after a damage line for one that carries another configuration's key; nothing when the span
// leaves the table (check_spans reports that).
template <class Row, class Each>
void for_each_child(const std::string& table, const std::vector<Row>& rows, const Span& span, Each each) {
  if (span.offset < 0 || span.count < 0 || static_cast<std::size_t>(span.offset + span.count) > rows.size()) return;
  for (int64_t i = span.offset; i < span.offset + span.count; ++i) {
    const Row& child = rows[static_cast<std::size_t>(i)];
    if (h5::get_string(child.key) != span.key) damage(table + ": a row of " + span.key + " carries " + h5::get_string(child.key));
    each(child);
  }
}

void groundtruth(h5::Store& store) {
  if (!store.exists(store::kGroundTruthTable)) {
    check_spans(store::kGroundTruthSamples, {}, samples_in(store, store::kGroundTruthSamples));
    check_spans(store::kGroundTruthRanks, {}, rows_of<store::GroundTruthRankRow>(store, store::kGroundTruthRanks).size());
    check_spans(store::kGroundTruthRounds, {}, rows_of<store::GroundTruthRoundRow>(store, store::kGroundTruthRounds).size());
    return;
  }
  const auto configs = store::read_every_groundtruth_row(store);
  const auto ranks = rows_of<store::GroundTruthRankRow>(store, store::kGroundTruthRanks);
  const auto rounds = rows_of<store::GroundTruthRoundRow>(store, store::kGroundTruthRounds);
  std::vector<Span> sample_spans, rank_spans, round_spans;
  for (const auto& row : configs) {
    const std::string key = h5::get_string(row.key);
    line(store::kGroundTruthTable, key);
    std::printf("status\t%s\t%s\n", key.c_str(), h5::get_string(row.status).c_str());
    sample_spans.push_back({row.samples_offset, row.samples_count, key});
    rank_spans.push_back({row.ranks_offset, row.ranks_count, key});
    round_spans.push_back({row.rounds_offset, row.rounds_count, key});
    for_each_child(
        store::kGroundTruthRanks, ranks, {row.ranks_offset, row.ranks_count, key},
        [&key](const store::GroundTruthRankRow& rank) { line(store::kGroundTruthRanks, key + "|" + std::to_string(rank.rank)); });
    for_each_child(store::kGroundTruthRounds, rounds, {row.rounds_offset, row.rounds_count, key},
                   [](const store::GroundTruthRoundRow&) {});
  }
  check_spans(store::kGroundTruthSamples, sample_spans, samples_in(store, store::kGroundTruthSamples));
  check_spans(store::kGroundTruthRanks, rank_spans, ranks.size());
  check_spans(store::kGroundTruthRounds, round_spans, rounds.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fault_rows FILE\n");
    return 2;
  }
  try {
    h5::Store store = h5::Store::open(argv[1], false);
    comm(store);
    ops(store);
    groundtruth(store);
  } catch (const std::exception& error) {
    damage(std::string("cannot read: ") + error.what());
  }
  return damage_count == 0 ? 0 : 1;
}
