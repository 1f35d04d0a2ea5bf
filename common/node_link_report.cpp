// node_link_report.cpp: slow pairs and slow nodes among measured node-pair links (node_link_report.hpp).
#include "common/node_link_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/stats.hpp"

namespace itertime {
namespace {

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

double gbit_per_s(double GBps) { return GBps * 8.0; }

// "0.20" or "0.19-0.21" (the flagged figures of a node's links, as printed with `pattern`).
std::string figure_range(const std::vector<double>& values, const char* pattern) {
  const std::string low = format(pattern, *std::min_element(values.begin(), values.end()));
  const std::string high = format(pattern, *std::max_element(values.begin(), values.end()));
  return low == high ? low : low + "-" + high;
}

}  // namespace

LinkJudgement judge_links(const std::vector<LinkFigures>& links) {
  LinkJudgement judgement;
  if (links.empty()) return judgement;
  std::map<std::string, double> best_bandwidth;
  std::map<std::string, double> best_latency;
  for (const LinkFigures& link : links) {
    for (const std::string& host : {link.host_a, link.host_b}) {
      auto bw = best_bandwidth.emplace(host, link.bandwidth_GBps).first;
      bw->second = std::max(bw->second, link.bandwidth_GBps);
      auto lat = best_latency.emplace(host, link.latency_us).first;
      lat->second = std::min(lat->second, link.latency_us);
    }
  }
  std::vector<double> bandwidths, latencies;
  for (const auto& [host, value] : best_bandwidth) bandwidths.push_back(value);
  for (const auto& [host, value] : best_latency) latencies.push_back(value);
  judgement.reference_bandwidth_GBps = stats::median(bandwidths);
  judgement.reference_latency_us = stats::median(latencies);

  for (std::size_t i = 0; i < links.size(); ++i) {
    LinkFlag flag{i, links[i].bandwidth_GBps<kSlowBandwidthFraction * judgement.reference_bandwidth_GBps, links[i].latency_us>
                             kSlowLatencyFactor *
                         judgement.reference_latency_us};
    if (flag.slow_bandwidth || flag.slow_latency) judgement.flagged.push_back(flag);
  }
  if (judgement.flagged.empty()) return judgement;
  // The nodes every flagged pair includes.
  std::set<std::string> shared{links[judgement.flagged.front().link].host_a, links[judgement.flagged.front().link].host_b};
  for (const LinkFlag& flag : judgement.flagged) {
    const LinkFigures& link = links[flag.link];
    for (auto it = shared.begin(); it != shared.end();) {
      it = (*it == link.host_a || *it == link.host_b) ? std::next(it) : shared.erase(it);
    }
  }
  if (shared.size() == 1) judgement.slow_node = *shared.begin();
  return judgement;
}

std::vector<std::string> link_report_lines(const std::vector<LinkFigures>& links, const LinkJudgement& judgement,
                                           const std::string& prefix) {
  std::vector<std::string> lines;
  char line[256];
  std::snprintf(line, sizeof(line), "%s  %-32s %12s %18s", prefix.c_str(), "node pair", "latency(us)", "bandwidth(Gbit/s)");
  lines.push_back(line);
  std::vector<const LinkFlag*> flag_of(links.size(), nullptr);
  for (const LinkFlag& flag : judgement.flagged) flag_of[flag.link] = &flag;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const LinkFigures& link = links[i];
    std::string mark;
    if (flag_of[i] != nullptr) {
      mark = "  SLOW";
      if (flag_of[i]->slow_bandwidth) mark += " bandwidth";
      if (flag_of[i]->slow_latency) mark += std::string(flag_of[i]->slow_bandwidth ? "," : "") + " latency";
    }
    std::snprintf(line, sizeof(line), "%s  %-32s %12.1f %18.3f%s", prefix.c_str(), (link.host_a + "-" + link.host_b).c_str(),
                  link.latency_us, gbit_per_s(link.bandwidth_GBps), mark.c_str());
    lines.push_back(line);
  }
  if (links.size() < 2) {
    lines.push_back(prefix + "one pair: nothing to compare it with");
    return lines;
  }
  std::snprintf(line, sizeof(line),
                "%sreference (the median over nodes of each node's best link): latency %.1f us, bandwidth %.3f Gbit/s; "
                "slow below %.0f%% of its bandwidth or above %.0f%% of its latency",
                prefix.c_str(), judgement.reference_latency_us, gbit_per_s(judgement.reference_bandwidth_GBps),
                kSlowBandwidthFraction * 100, kSlowLatencyFactor * 100);
  lines.push_back(line);
  if (judgement.flagged.empty()) {
    lines.push_back(prefix + "no slow pair");
    return lines;
  }
  // What a flagged set of links measured, against the reference: "at 0.20 Gbit/s against a median 0.98".
  const auto figures = [&](const std::vector<std::size_t>& which) {
    std::vector<double> bandwidths, latencies;
    bool any_bandwidth = false, any_latency = false;
    for (std::size_t index : which) {
      const LinkFlag& flag = *flag_of[index];
      any_bandwidth = any_bandwidth || flag.slow_bandwidth;
      any_latency = any_latency || flag.slow_latency;
      bandwidths.push_back(gbit_per_s(links[index].bandwidth_GBps));
      latencies.push_back(links[index].latency_us);
    }
    std::string text;
    if (any_bandwidth) {
      text += "at " + figure_range(bandwidths, "%.2f") + " Gbit/s against a median " +
              format("%.2f", gbit_per_s(judgement.reference_bandwidth_GBps));
    }
    if (any_latency) {
      text += std::string(any_bandwidth ? "; " : "at ") + figure_range(latencies, "%.0f") + " us against a median " +
              format("%.0f", judgement.reference_latency_us) + " us";
    }
    return text;
  };
  if (!judgement.slow_node.empty()) {
    std::vector<std::size_t> which;
    for (const LinkFlag& flag : judgement.flagged) which.push_back(flag.link);
    std::size_t node_links = 0;
    for (const LinkFigures& link : links)
      node_links += (link.host_a == judgement.slow_node || link.host_b == judgement.slow_node);
    const std::string count = which.size() == node_links ? "its " + std::to_string(which.size())
                                                         : std::to_string(which.size()) + " of its " + std::to_string(node_links);
    lines.push_back(prefix + "slow: " + judgement.slow_node + " (" + count + (which.size() == 1 ? " link " : " links ") +
                    figures(which) + ")");
    return lines;
  }
  for (const LinkFlag& flag : judgement.flagged) {
    const LinkFigures& link = links[flag.link];
    lines.push_back(prefix + "slow link: " + link.host_a + "-" + link.host_b + " (" + figures({flag.link}) + ")");
  }
  return lines;
}

}  // namespace itertime
