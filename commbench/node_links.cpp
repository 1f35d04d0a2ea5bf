// node_links.cpp: the node-pair probe: ping-pong latency and windowed bandwidth between node leaders, one
// pair at a time, one /comm/node_links row per pair (node_links.hpp).
#include "commbench/node_links.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/build_info.hpp"
#include "common/node_link_report.hpp"
#include "common/node_links_store.hpp"
#include "common/stats.hpp"
#include "runtime/resume_plan.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPingTag = 301;
constexpr int kHeaderTag = 302;
constexpr int kDataTag = 303;
constexpr int kAckTag = 304;

double since_us(Clock::time_point start) { return std::chrono::duration<double, std::micro>(Clock::now() - start).count(); }

// One stretch of 8-byte round trips between this rank and `peer` (`initiator` starts each): `warmup`
// untimed, then `round_trips` timed, appended to `round_trips_us` on the initiator.
void ping_pong(MPI_Comm comm, int peer, bool initiator, int warmup, int round_trips, std::vector<double>& round_trips_us) {
  char message[8] = {};
  for (int i = 0; i < warmup + round_trips; ++i) {
    const auto start = Clock::now();
    if (initiator) {
      MPI_Send(message, sizeof(message), MPI_BYTE, peer, kPingTag, comm);
      MPI_Recv(message, sizeof(message), MPI_BYTE, peer, kPingTag, comm, MPI_STATUS_IGNORE);
      if (i >= warmup) round_trips_us.push_back(since_us(start));
    } else {
      MPI_Recv(message, sizeof(message), MPI_BYTE, peer, kPingTag, comm, MPI_STATUS_IGNORE);
      MPI_Send(message, sizeof(message), MPI_BYTE, peer, kPingTag, comm);
    }
  }
}

// The sending side of one direction: windows of back-to-back messages, each acknowledged; GB/s.
double send_windows_GBps(MPI_Comm comm, int peer, std::vector<char>& buffer, const NodeLinkProbe& probe) {
  const auto window_us = [&](std::size_t message_bytes) {
    int64_t header = static_cast<int64_t>(message_bytes);
    MPI_Send(&header, 1, MPI_INT64_T, peer, kHeaderTag, comm);
    std::vector<MPI_Request> requests(static_cast<std::size_t>(probe.window_messages));
    const auto start = Clock::now();
    for (int k = 0; k < probe.window_messages; ++k) {
      MPI_Isend(buffer.data() + static_cast<std::size_t>(k) * message_bytes, static_cast<int>(message_bytes), MPI_BYTE, peer,
                kDataTag, comm, &requests[static_cast<std::size_t>(k)]);
    }
    MPI_Waitall(probe.window_messages, requests.data(), MPI_STATUSES_IGNORE);
    char ack = 0;
    MPI_Recv(&ack, 1, MPI_BYTE, peer, kAckTag, comm, MPI_STATUS_IGNORE);
    return since_us(start);
  };
  // Warm-up: double the size until a window lasts min_window_s (or the size is the largest).
  std::size_t message_bytes = probe.first_message_bytes;
  while (window_us(message_bytes) < probe.min_window_s * 1e6 && message_bytes * 2 <= probe.max_message_bytes) {
    message_bytes *= 2;
  }
  std::vector<double> windows_us;
  for (int w = 0; w < probe.bandwidth_windows; ++w) windows_us.push_back(window_us(message_bytes));
  int64_t done = 0;
  MPI_Send(&done, 1, MPI_INT64_T, peer, kHeaderTag, comm);
  const double window_bytes = static_cast<double>(message_bytes) * probe.window_messages;
  return window_bytes / (stats::median(windows_us) * 1e3);
}

// The receiving side: a window of the size the sender names, acknowledged, until it names 0.
void receive_windows(MPI_Comm comm, int peer, std::vector<char>& buffer, const NodeLinkProbe& probe) {
  std::vector<MPI_Request> requests(static_cast<std::size_t>(probe.window_messages));
  while (true) {
    int64_t message_bytes = 0;
    MPI_Recv(&message_bytes, 1, MPI_INT64_T, peer, kHeaderTag, comm, MPI_STATUS_IGNORE);
    if (message_bytes <= 0) return;
    const auto bytes = static_cast<std::size_t>(message_bytes);
    for (int k = 0; k < probe.window_messages; ++k) {
      MPI_Irecv(buffer.data() + static_cast<std::size_t>(k) * bytes, static_cast<int>(bytes), MPI_BYTE, peer, kDataTag, comm,
                &requests[static_cast<std::size_t>(k)]);
    }
    MPI_Waitall(probe.window_messages, requests.data(), MPI_STATUSES_IGNORE);
    char ack = 0;
    MPI_Send(&ack, 1, MPI_BYTE, peer, kAckTag, comm);
  }
}

// One pair's bandwidth, on its two leaders: {a->b GB/s, b->a GB/s}, each filled on its sending leader
// (zeros elsewhere).
std::vector<double> measure_bandwidth(MPI_Comm comm, int leader_a, int leader_b, int rank, std::vector<char>& buffer,
                                      const NodeLinkProbe& probe) {
  std::vector<double> figures(2, 0.0);
  if (rank != leader_a && rank != leader_b) return figures;
  const bool is_a = rank == leader_a;
  const int peer = is_a ? leader_b : leader_a;
  if (buffer.empty()) buffer.resize(probe.max_message_bytes * static_cast<std::size_t>(probe.window_messages));
  if (is_a) {
    figures[0] = send_windows_GBps(comm, peer, buffer, probe);
    receive_windows(comm, peer, buffer, probe);
  } else {
    receive_windows(comm, peer, buffer, probe);
    figures[1] = send_windows_GBps(comm, peer, buffer, probe);
  }
  return figures;
}

}  // namespace

NodeLinksSummary measure_node_links(h5::Store* store, const NodeInfo& nodes, const NodeLinkProbe& probe) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  NodeLinksSummary summary;
  if (nodes.num_nodes < 2) {
    if (rank == 0) {
      std::printf("#\n# node links: one node (%s), no pairs to measure\n",
                  nodes.hostnames.empty() ? "" : nodes.hostnames[0].c_str());
      std::fflush(stdout);
    }
    return summary;
  }
  // Each node's leader: its lowest world rank (local rank 0).
  std::vector<int> leader(static_cast<std::size_t>(nodes.num_nodes), -1);
  for (std::size_t r = 0; r < nodes.node_of_rank.size(); ++r) {
    int& first = leader[static_cast<std::size_t>(nodes.node_of_rank[r])];
    if (first < 0) first = static_cast<int>(r);
  }
  struct Pair {
    int a, b;
  };
  std::vector<Pair> pairs;
  for (int a = 0; a < nodes.num_nodes; ++a) {
    for (int b = a + 1; b < nodes.num_nodes; ++b) pairs.push_back({a, b});
  }
  const auto host = [&](int node) { return nodes.hostnames[static_cast<std::size_t>(node)]; };
  summary.pairs_total = pairs.size();

  // --resume: the pairs already in the file (rank 0 reads them; every rank learns which).
  std::map<std::string, store::NodeLinkRow> stored;
  std::vector<uint8_t> present(pairs.size(), 0);
  on_root_collectively(rank, [&] {
    for (const store::NodeLinkRow& row : store::read_node_links(*store)) stored[store::node_link_key(row)] = row;
    for (std::size_t p = 0; p < pairs.size(); ++p)
      present[p] = stored.count(store::node_link_key(host(pairs[p].a), host(pairs[p].b))) > 0 ? 1 : 0;
  });
  present = broadcast_flags(present);
  for (uint8_t p : present) summary.pairs_present += p;

  if (rank == 0) {
    std::printf("#\n# node links: %d nodes, %zu pairs measured one at a time between the nodes' first ranks", nodes.num_nodes,
                pairs.size());
    if (summary.pairs_present > 0) std::printf(" (%zu already in the file)", summary.pairs_present);
    std::printf(
        "\n# latency: half the median round trip of 8 bytes (%d round trips, in %d turns over the pairs); bandwidth: %d"
        " back-to-back messages one way, then a 1-byte ack, median of %d windows, the slower direction\n",
        probe.latency_round_trips, probe.latency_rounds, probe.window_messages, probe.bandwidth_windows);
    std::fflush(stdout);
  }
  MpiComm comm = MpiComm::split(MPI_COMM_WORLD, 0, rank);  // the probe's own messages, apart from any other
  std::vector<std::size_t> todo;
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    if (!present[p]) todo.push_back(p);
  }
  const auto leader_of = [&](int node) { return leader[static_cast<std::size_t>(node)]; };
  // Latency: the round trips of every pair in latency_rounds stretches, taken in turn over the pairs, so
  // that a spell of load on the machine falls on all pairs alike, not on the one measured then.
  std::vector<std::vector<double>> round_trips_us(todo.size());
  const int per_round = std::max(1, probe.latency_round_trips / std::max(1, probe.latency_rounds));
  for (int round = 0; round < probe.latency_rounds; ++round) {
    for (std::size_t t = 0; t < todo.size(); ++t) {
      const int a = leader_of(pairs[todo[t]].a), b = leader_of(pairs[todo[t]].b);
      if (rank == a || rank == b) {
        ping_pong(comm.get(), rank == a ? b : a, rank == a, round == 0 ? probe.latency_warmup : probe.latency_warmup / 10,
                  per_round, round_trips_us[t]);
      }
      quiet_barrier(comm.get());
    }
  }
  // Bandwidth: one pair at a time; then the pair's row.
  std::vector<char> buffer;
  std::map<std::size_t, LinkFigures> measured;
  for (std::size_t t = 0; t < todo.size(); ++t) {
    const Pair& pair = pairs[todo[t]];
    std::vector<double> figures = measure_bandwidth(comm.get(), leader_of(pair.a), leader_of(pair.b), rank, buffer, probe);
    // {a->b GB/s, b->a GB/s, latency_us, round trips}, each from the leader that knows it.
    figures.push_back(round_trips_us[t].empty() ? 0.0 : stats::median(round_trips_us[t]) / 2.0);
    figures.push_back(static_cast<double>(round_trips_us[t].size()));
    quiet_barrier(comm.get());
    std::vector<double> gathered(figures.size(), 0.0);
    MPI_Reduce(figures.data(), gathered.data(), static_cast<int>(figures.size()), MPI_DOUBLE, MPI_MAX, 0, comm.get());
    ++summary.pairs_measured;
    if (rank != 0) continue;
    const std::string a = host(pair.a), b = host(pair.b);
    store::NodeLinkRow row{};
    h5::set_string(row.host_a, a);
    h5::set_string(row.host_b, b);
    row.node_a = pair.a;
    row.node_b = pair.b;
    row.latency_us = gathered[2];
    row.bandwidth_GBps = std::min(gathered[0], gathered[1]);
    row.samples = static_cast<int64_t>(gathered[3]);
    h5::set_string(row.measured_utc, utc_timestamp());
    store::append_node_link(*store, row);
    measured[todo[t]] = {a, b, row.latency_us, row.bandwidth_GBps};
    std::printf("#   %s-%s: latency %.1f us, bandwidth %.3f Gbit/s %s->%s, %.3f Gbit/s %s->%s\n", a.c_str(), b.c_str(),
                row.latency_us, gathered[0] * 8, a.c_str(), b.c_str(), gathered[1] * 8, b.c_str(), a.c_str());
    std::fflush(stdout);
  }
  // Every pair of the job, in order: measured now or read from the file.
  std::vector<LinkFigures> links;
  for (std::size_t p = 0; rank == 0 && p < pairs.size(); ++p) {
    if (present[p]) {
      const store::NodeLinkRow& row = stored.at(store::node_link_key(host(pairs[p].a), host(pairs[p].b)));
      links.push_back({host(pairs[p].a), host(pairs[p].b), row.latency_us, row.bandwidth_GBps});
    } else {
      links.push_back(measured.at(p));
    }
  }
  if (rank == 0) {
    const LinkJudgement judgement = judge_links(links);
    summary.pairs_flagged = judgement.flagged.size();
    for (const std::string& line : link_report_lines(links, judgement, "  ")) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  unsigned long flagged = summary.pairs_flagged;
  MPI_Bcast(&flagged, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  summary.pairs_flagged = flagged;
  return summary;
}

}  // namespace itertime::calibrate
