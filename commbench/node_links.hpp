// node_links.hpp: the node-pair probe of `calibrate comm`: every pair of nodes' latency and bandwidth,
// measured between the two nodes' leaders (local rank 0) one pair at a time, so that each link is alone;
// appended to /comm/node_links (common/node_links_store.hpp) and judged (common/node_link_report.hpp).
// Invariants:
//  - Collective over MPI_COMM_WORLD. The ranks not in the pair being measured wait in a quiet barrier
//    (they sleep between polls, leaving the cores to the pair). Only world rank 0 reads, writes and prints.
//  - latency_us: osu_latency's ping-pong, half the median round trip of an 8-byte message after warm-up
//    round trips; a pair's round trips are taken in NodeLinkProbe::latency_rounds stretches, in turn with
//    the other pairs' (still one pair at a time), so that a spell of load on the machine does not fall on
//    one pair alone and make it look slow. Bandwidth: osu_bw's window, NodeLinkProbe::window_messages messages posted back to
//    back one way, then a 1-byte acknowledgement; GB/s = the window's bytes / its median time. The message size starts at
//    first_message_bytes and doubles (those windows are the warm-up) until one window lasts min_window_s or the size reaches
//    max_message_bytes, so that a slow link takes no longer than needed and a fast one is not timed on a window shorter than its
//    latency can hide in. Both directions are measured; the row holds the slower (a node whose sending side is slow shows there).
//  - One node: no pairs; nothing is measured or stored (rank 0 says so). --resume: the pairs whose key
//    (the two hostnames) is already in the file are not measured again, and are reported from the file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/h5store.hpp"
#include "runtime/mpi_session.hpp"

namespace itertime::calibrate {

struct NodeLinkProbe {
  int latency_warmup = 100;        // untimed round trips
  int latency_round_trips = 1000;  // timed round trips, in latency_rounds turns
  int latency_rounds = 5;          // turns over all pairs (each turn's stretch after latency_warmup / 10 untimed)
  int window_messages = 8;
  std::size_t first_message_bytes = std::size_t{256} << 10;
  std::size_t max_message_bytes = std::size_t{4} << 20;
  double min_window_s = 0.05;
  int bandwidth_windows = 5;  // timed windows per direction
};

struct NodeLinksSummary {
  std::size_t pairs_total = 0;
  std::size_t pairs_present = 0;  // already in the file (--resume)
  std::size_t pairs_measured = 0;
  std::size_t pairs_flagged = 0;  // slow pairs (node_link_report.hpp), present ones included
};

// Collective over MPI_COMM_WORLD (see the invariants). `store`: world rank 0's open store (null on the
// other ranks). Returns the same summary on every rank.
NodeLinksSummary measure_node_links(h5::Store* store, const NodeInfo& nodes, const NodeLinkProbe& probe = {});

}  // namespace itertime::calibrate
