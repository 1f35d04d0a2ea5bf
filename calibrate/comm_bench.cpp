#include "calibrate/comm_bench.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "common/comm_store.hpp"
#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "common/mpi_communicator.hpp"
#include "common/mpi_session.hpp"
#include "common/nccl_communicator.hpp"
#include "common/stats.hpp"

namespace itertime::calibrate {
using namespace itertime::store;

namespace {

constexpr int kPipelineDepth = 8;

using Clock = std::chrono::steady_clock;

double elapsed_us(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

std::string span_label(const std::vector<std::vector<int>>& groups, const NodeInfo& nodes) {
  bool any_intra = false;
  bool any_inter = false;
  for (const auto& group : groups) {
    const int node = nodes.node_of_rank[static_cast<std::size_t>(group.front())];
    const bool same = std::all_of(group.begin(), group.end(),
                                  [&](int r) { return nodes.node_of_rank[static_cast<std::size_t>(r)] == node; });
    (same ? any_intra : any_inter) = true;
  }
  if (any_intra && any_inter) return "mixed";
  return any_inter ? "inter-node" : "intra-node";
}

struct Measurement {
  std::vector<double> samples_us;  // max over ranks, per timed iteration
  int64_t check_errors = 0;
  std::string first_error;
};

Measurement measure_point(Communicator& comm, const PointSpec& point, int warmup_iters, int iters) {
  const int n = comm.size();
  const int rank = comm.rank();
  const std::size_t element = dtype_bytes(point.dtype);
  std::vector<uint8_t> send_host, recv_host;
  fill_buffers(point.collective, point.dtype, rank, n, point.count, send_host, recv_host);
  auto send = comm.allocate(std::max<std::size_t>(send_host.size(), element));
  auto recv = comm.allocate(recv_host.size());
  comm.copy_in(*send, send_host.data(), send_host.size());
  comm.copy_in(*recv, recv_host.data(), recv_host.size());

  // 1. Untimed correctness check.
  MPI_Barrier(MPI_COMM_WORLD);
  run_collective(point.collective, comm, send->data(), recv->data(), point.count, point.dtype);
  comm.synchronize();
  comm.copy_out(recv_host.data(), *recv, recv_host.size());
  const CheckResult check = check_result(point.collective, point.dtype, rank, n, point.count, recv_host);
  Measurement result;
  long long local_errors = static_cast<long long>(check.errors);
  long long total_errors = 0;
  MPI_Allreduce(&local_errors, &total_errors, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  result.check_errors = total_errors;
  // The first failing rank's description travels to rank 0 for the report.
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int reporter = check.errors > 0 ? world_rank : 1 << 30;
  MPI_Allreduce(MPI_IN_PLACE, &reporter, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (total_errors > 0 && reporter != 0) {
    char text[160] = {};
    if (world_rank == reporter) {
      const std::string message = "rank " + std::to_string(world_rank) + " " + check.first_error;
      std::snprintf(text, sizeof(text), "%s", message.c_str());
      MPI_Send(text, sizeof(text), MPI_CHAR, 0, 99, MPI_COMM_WORLD);
    } else if (world_rank == 0) {
      MPI_Recv(text, sizeof(text), MPI_CHAR, reporter, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    result.first_error = text;
  } else if (total_errors > 0) {
    result.first_error = "rank 0 " + check.first_error;
  }

  // 2. Warm-up, 3. timed calls.
  for (int i = 0; i < warmup_iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    run_collective(point.collective, comm, send->data(), recv->data(), point.count, point.dtype);
    comm.synchronize();
  }
  std::vector<double> local(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    if (point.mode == TimingMode::kLatency) {
      run_collective(point.collective, comm, send->data(), recv->data(), point.count, point.dtype);
      comm.synchronize();
      local[static_cast<std::size_t>(i)] = elapsed_us(start, Clock::now());
    } else {
      for (int j = 0; j < kPipelineDepth; ++j) {
        run_collective(point.collective, comm, send->data(), recv->data(), point.count, point.dtype);
      }
      comm.synchronize();
      local[static_cast<std::size_t>(i)] = elapsed_us(start, Clock::now()) / kPipelineDepth;
    }
  }
  result.samples_us.resize(local.size());
  MPI_Allreduce(local.data(), result.samples_us.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

std::unique_ptr<Communicator> make_communicator(Backend backend, MPI_Comm comm) {
  if (backend == Backend::kCuda) return std::make_unique<NcclCommunicator>(comm);
  return std::make_unique<MpiCommunicator>(comm);
}

void print_header() {
  std::printf("#\n# %-9s %-14s %-5s %5s %-11s %-10s %10s %9s %12s %12s %12s %6s %11s %11s  %s\n", "point",
              "collective", "dtype", "group", "layout", "span", "size(B)", "count", "time_us(med)", "time_us(min)",
              "time_us(p90)", "cv", "algbw(GB/s)", "busbw(GB/s)", "check");
}

}  // namespace

CommCalibrationSummary calibrate_comm(const CommCalibrationOptions& options) {
  const auto started = Clock::now();
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  // Every rank validates the same options, so a mistake stops all of them the same way.
  std::vector<PointSpec> points;
  try {
    points = build_points(options.sweep, world_size);
    if (options.backend == Backend::kCuda && !cuda_device_available()) {
      throw UserError("--backend cuda needs a CUDA device and a CUDA build; none is available here (use --backend cpu)");
    }
  } catch (const CollectiveUserError&) {
    throw;
  } catch (const UserError& error) {
    throw CollectiveUserError(error.what());
  }

  const NodeInfo nodes = detect_nodes();
  if (options.backend == Backend::kCuda) bind_cuda_device(nodes.local_rank);

  std::unique_ptr<h5::Store> store;
  std::vector<uint8_t> present(points.size(), 0);
  on_root_collectively(world_rank, [&] {
    store = std::make_unique<h5::Store>(
        h5::Store::create_or_resume(options.output_path, options.force, options.resume, options.provenance));
    const auto keys = existing_comm_keys(*store);
    for (std::size_t i = 0; i < points.size(); ++i) present[i] = keys.count(points[i].key()) ? 1 : 0;
    std::string node_of_rank;
    for (std::size_t r = 0; r < nodes.node_of_rank.size(); ++r) {
      node_of_rank += (r ? "," : "") + std::to_string(nodes.node_of_rank[r]);
    }
    std::string hostnames;
    for (std::size_t i = 0; i < nodes.hostnames.size(); ++i) hostnames += (i ? "," : "") + nodes.hostnames[i];
    store->set_meta("comm_world_size", static_cast<int64_t>(world_size));
    store->set_meta("comm_num_nodes", static_cast<int64_t>(nodes.num_nodes));
    store->set_meta("comm_node_of_rank", node_of_rank);
    store->set_meta("comm_hostnames", hostnames);
    store->set_meta("comm_backend", options.backend == Backend::kCuda ? "nccl" : "mpi");
  });
  MPI_Bcast(present.data(), static_cast<int>(present.size()), MPI_UINT8_T, 0, MPI_COMM_WORLD);

  CommCalibrationSummary summary;
  summary.points_total = points.size();
  summary.points_present = static_cast<std::size_t>(std::count(present.begin(), present.end(), 1));
  if (world_rank == 0) {
    std::printf("# itertime calibrate comm: %d ranks on %d node(s), backend %s, mode %s, %zu points",
                world_size, nodes.num_nodes, options.backend == Backend::kCuda ? "nccl" : "mpi",
                to_string(options.sweep.mode).c_str(), points.size());
    if (summary.points_present > 0) std::printf(" (%zu already in %s, resuming)", summary.points_present, options.output_path.c_str());
    std::printf("\n# warm-up %d, timed iterations %d per point; times are the max over all ranks\n",
                options.sweep.warmup_iters, options.sweep.iters);
    std::fflush(stdout);
  }

  // Test hook: abort the whole job after this many newly appended points (simulates a killed job).
  long abort_after = -1;
  if (const char* text = std::getenv("ITERTIME_FAULT_ABORT_AFTER_POINTS")) abort_after = std::strtol(text, nullptr, 10);

  std::size_t index = 0;
  while (index < points.size()) {
    // One block per (group size, layout): build its communicators once.
    const int group_size = points[index].group_size;
    const GroupLayout layout = points[index].layout;
    std::size_t block_end = index;
    while (block_end < points.size() && points[block_end].group_size == group_size && points[block_end].layout == layout) {
      ++block_end;
    }
    const bool block_needed = std::any_of(present.begin() + static_cast<long>(index), present.begin() + static_cast<long>(block_end),
                                          [](uint8_t p) { return p == 0; });
    if (!block_needed) {
      index = block_end;
      continue;
    }
    const auto groups = layout_groups(world_size, group_size, layout);
    int color = 0;
    int key = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t j = 0; j < groups[g].size(); ++j) {
        if (groups[g][j] == world_rank) {
          color = static_cast<int>(g);
          key = static_cast<int>(j);
        }
      }
    }
    MpiComm group_comm = MpiComm::split(MPI_COMM_WORLD, color, key);
    std::unique_ptr<Communicator> comm = make_communicator(options.backend, group_comm.get());
    const std::string span = span_label(groups, nodes);
    if (world_rank == 0) {
      std::printf("#\n# group size %d, %s layout (%zu groups at once, %s); first group: ranks", group_size,
                  to_string(layout).c_str(), groups.size(), span.c_str());
      for (int r : groups.front()) std::printf(" %d", r);
      std::printf("\n");
      print_header();
    }

    for (; index < block_end; ++index) {
      if (present[index]) continue;
      const PointSpec& point = points[index];
      Measurement measured = measure_point(*comm, point, options.sweep.warmup_iters, options.sweep.iters);
      ++summary.points_measured;
      if (measured.check_errors > 0) ++summary.points_failed_check;
      if (world_rank != 0) continue;

      const stats::Summary s = stats::summarize(measured.samples_us);
      CommRow row{};
      h5::set_string(row.collective, to_string(point.collective));
      h5::set_string(row.dtype, itertime::to_string(point.dtype));
      row.group_size = point.group_size;
      h5::set_string(row.layout, to_string(point.layout));
      h5::set_string(row.span, span);
      h5::set_string(row.mode, to_string(point.mode));
      h5::set_string(row.backend, comm->name());
      row.bytes = static_cast<int64_t>(point.bytes);
      row.count = static_cast<int64_t>(point.count);
      row.warmup_iters = options.sweep.warmup_iters;
      row.iters = options.sweep.iters;
      row.time_us_min = s.min;
      row.time_us_median = s.median;
      row.time_us_mean = s.mean;
      row.time_us_p90 = s.p90;
      row.time_us_max = s.max;
      row.time_cv = s.cv;
      row.algbw_GBps = s.median > 0 ? static_cast<double>(point.bytes) / (s.median * 1e3) : 0.0;
      row.busbw_GBps = row.algbw_GBps * busbw_factor(point.collective, point.group_size);
      row.check_errors = measured.check_errors;
      h5::set_string(row.measured_utc, utc_timestamp());
      append_comm_point(*store, row, measured.samples_us);

      const std::string check = measured.check_errors == 0
                                    ? "ok"
                                    : "FAILED: " + std::to_string(measured.check_errors) + " wrong elements (" +
                                          measured.first_error + ")";
      char progress[48];
      std::snprintf(progress, sizeof(progress), "%zu/%zu", index + 1, points.size());
      std::printf("  %-9s %-14s %-5s %5d %-11s %-10s %10zu %9zu %12.2f %12.2f %12.2f %6.3f %11.3f %11.3f  %s\n", progress,
                  to_string(point.collective).c_str(), itertime::to_string(point.dtype).c_str(), point.group_size,
                  to_string(point.layout).c_str(), span.c_str(), point.bytes, point.count, s.median, s.min, s.p90, s.cv,
                  row.algbw_GBps, row.busbw_GBps, check.c_str());
      std::fflush(stdout);
      if (measured.check_errors > 0) {
        std::fprintf(stderr, "itertime: CORRECTNESS CHECK FAILED for %s: %s\n", point.key().c_str(), check.c_str());
      }
      if (abort_after >= 0 && static_cast<long>(summary.points_measured) >= abort_after) {
        std::fprintf(stderr, "itertime: ITERTIME_FAULT_ABORT_AFTER_POINTS=%ld reached, aborting the job\n", abort_after);
        MpiSession::abort_all(3);
      }
    }
  }

  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (world_rank == 0) {
    std::printf("#\n# %zu points measured, %zu already present, %zu of %zu in %s; %zu failed their check; %.1f s\n",
                summary.points_measured, summary.points_present, summary.points_measured + summary.points_present,
                summary.points_total, options.output_path.c_str(), summary.points_failed_check, summary.elapsed_s);
  }
  MPI_Bcast(&summary.points_failed_check, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  return summary;
}

}  // namespace itertime::calibrate
