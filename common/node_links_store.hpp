// node_links_store.hpp: the /comm/node_links table of the HDF5 store (schema in docs/schema.md): one row
// per pair of nodes, the pair's ping-pong latency and one-way bandwidth (commbench/node_links.hpp).
// Invariants: one row per pair, appended (one commit) as soon as the pair is measured; a pair is named by
// its two hostnames, host_a before host_b in the job's node order (node_a < node_b), and keyed by the two
// names sorted, so --resume on the same nodes in another order finds it. No child tables. Reading a
// store without the table gives no rows. Strings are fixed-length, NUL-padded.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/h5store.hpp"

namespace itertime::store {

struct NodeLinkRow {
  char host_a[64];
  char host_b[64];
  int64_t node_a;  // node indices in the measuring job (ordered by lowest world rank)
  int64_t node_b;
  double latency_us;      // half the median round trip of an 8-byte message
  double bandwidth_GBps;  // the slower direction: bytes of a window / its median time, 1e9 bytes per second
  int64_t samples;        // round trips timed for latency_us
  char measured_utc[24];
};

inline constexpr const char* kNodeLinksTable = "/comm/node_links";

// "A|B" with the two hostnames sorted.
std::string node_link_key(const std::string& host_a, const std::string& host_b);
std::string node_link_key(const NodeLinkRow& row);

void append_node_link(h5::Store& store, const NodeLinkRow& row);
// Every row of the table, in file order; none when the table does not exist.
std::vector<NodeLinkRow> read_node_links(h5::Store& store);

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<NodeLinkRow>);

}  // namespace itertime::store
