// comm_bench.cpp: calibrate comm: the measurement loop over the sweep, one /comm row per point (comm_bench.hpp).
// Invariants: a latency sample is the max over all world ranks of one barrier-separated call; a pipelined
// sample is the mean over all world ranks of each rank's average over pipelined_calls_per_sample(bytes)
// back-to-back calls (timing_loop.hpp), as osu_allreduce averages per-rank averages over ranks; the points
// of a block share one page-aligned buffer pair, in both timing modes (point_buffers.hpp).
#include "commbench/comm_bench.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "common/comm_store.hpp"
#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/timing_row.hpp"
#include "common/h5store.hpp"
#include "runtime/mpi_communicator.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"
#include "runtime/outside_load_probe.hpp"
#include "runtime/resume_plan.hpp"
#include "runtime/speed_reference.hpp"
#include "common/stats.hpp"
#include "common/store_meta.hpp"
#include "commbench/node_links.hpp"
#include "commbench/point_buffers.hpp"
#include "commbench/timing_loop.hpp"

namespace itertime::calibrate {
using namespace itertime::store;

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_us(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

std::string span_label(const std::vector<std::vector<int>>& groups, const NodeInfo& nodes) {
  bool any_intra = false;
  bool any_inter = false;
  for (const auto& group : groups) {
    const int node = nodes.node_of_rank[static_cast<std::size_t>(group.front())];
    const bool same =
        std::all_of(group.begin(), group.end(), [&](int r) { return nodes.node_of_rank[static_cast<std::size_t>(r)] == node; });
    (same ? any_intra : any_inter) = true;
  }
  if (any_intra && any_inter) return "mixed";
  return any_inter ? "inter-node" : "intra-node";
}

struct Measurement {
  std::vector<double> samples_us;  // per sample, known to every rank: latency mode max over ranks, pipelined mode mean
  int64_t check_errors = 0;
  std::string first_error;
};

Measurement measure_point(Communicator& comm, BlockBuffers& buffers, const PointSpec& point, int warmup_iters, int iters) {
  const int n = comm.size();
  const int rank = comm.rank();
  std::vector<uint8_t> send_host, recv_host;
  fill_buffers(point.collective, point.dtype, rank, n, point.count, send_host, recv_host);
  // Views of the block's shared page-aligned pair (point_buffers.hpp).
  PointBuffers point_buffers = buffers.for_point(point);
  CommBuffer* send = point_buffers.send.get();
  CommBuffer* recv = point_buffers.recv.get();
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
  const auto call = [&] { run_collective(point.collective, comm, send->data(), recv->data(), point.count, point.dtype); };
  const auto finish = [&] { comm.synchronize(); };
  const int calls_per_sample = pipelined_calls_per_sample(point.bytes);
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (point.mode == TimingMode::kLatency) {
      const auto start = Clock::now();
      call();
      finish();
      local[static_cast<std::size_t>(i)] = elapsed_us(start, Clock::now());
    } else {
      local[static_cast<std::size_t>(i)] = time_back_to_back_us(calls_per_sample, call, finish);
    }
  }
  result.samples_us.resize(local.size());
  if (point.mode == TimingMode::kLatency) {
    // The slowest rank of the slowest group: what a training step waiting on the collective sees.
    MPI_Allreduce(local.data(), result.samples_us.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  } else {
    // osu_allreduce's figure: the average over ranks of each rank's per-call average.
    MPI_Allreduce(local.data(), result.samples_us.data(), iters, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    for (double& sample_us : result.samples_us) sample_us /= world_size;
  }
  return result;
}

std::unique_ptr<Communicator> make_communicator(Backend backend, MPI_Comm comm) {
  if (backend == Backend::kCuda) return std::make_unique<NcclCommunicator>(comm);
  return std::make_unique<MpiCommunicator>(comm);
}

void print_header() {
  std::printf("#\n# %-9s %-14s %-5s %5s %-11s %-10s %10s %9s %12s %12s %12s %6s %11s %11s  %s\n", "point", "collective", "dtype",
              "group", "layout", "span", "size(B)", "count", "time_us(med)", "time_us(min)", "time_us(p90)", "cv", "algbw(GB/s)",
              "busbw(GB/s)", "check");
}

// Every rank validates the same options, so a mistake stops all of them the same way.
std::vector<PointSpec> plan_points(const CommCalibrationOptions& options, int world_size) {
  try {
    std::vector<PointSpec> points = build_points(options.sweep, world_size);
    if (options.backend == Backend::kCuda && !cuda_device_available()) {
      throw UserError("--backend cuda needs a CUDA device and a CUDA build; none is available here (use --backend cpu)");
    }
    return points;
  } catch (const CollectiveUserError&) {
    throw;
  } catch (const UserError& error) {
    throw CollectiveUserError(error.what());
  }
}

// /meta: where the ranks of the sweep sat, and the backend (rank 0, once the store is open).
void record_topology(h5::Store& store, const NodeInfo& nodes, int world_size, Backend backend) {
  std::string node_of_rank;
  for (std::size_t r = 0; r < nodes.node_of_rank.size(); ++r) {
    node_of_rank += (r ? "," : "") + std::to_string(nodes.node_of_rank[r]);
  }
  std::string hostnames;
  for (std::size_t i = 0; i < nodes.hostnames.size(); ++i) hostnames += (i ? "," : "") + nodes.hostnames[i];
  store.set_meta(store::meta_key::kCommWorldSize, static_cast<int64_t>(world_size));
  store.set_meta(store::meta_key::kCommNumNodes, static_cast<int64_t>(nodes.num_nodes));
  store.set_meta(store::meta_key::kCommNodeOfRank, node_of_rank);
  store.set_meta(store::meta_key::kCommHostnames, hostnames);
  store.set_meta(store::meta_key::kCommBackend, backend == Backend::kCuda ? "nccl" : "mpi");
}

std::vector<std::string> point_keys(const std::vector<PointSpec>& points) {
  std::vector<std::string> keys;
  for (const PointSpec& point : points) keys.push_back(point.key());
  return keys;
}

// One sweep in progress: what every step of it reads, and the summary it fills.
struct SweepRun {
  const CommCalibrationOptions& options;
  const std::vector<PointSpec>& points;
  const NodeInfo& nodes;
  int world_rank = 0;
  int world_size = 1;
  ResumePlan plan;
  OutsideLoadProbe& probe;
  long abort_after = -1;  // test hook: abort the job after this many newly appended points
  CommCalibrationSummary summary;
};

void print_start(const SweepRun& run) {
  const CommCalibrationOptions& options = run.options;
  std::printf("# itertime calibrate comm: %d ranks on %d node(s), backend %s, mode %s, %zu points", run.world_size,
              run.nodes.num_nodes, options.backend == Backend::kCuda ? "nccl" : "mpi", to_string(options.sweep.mode).c_str(),
              run.points.size());
  if (run.summary.points_present > 0) {
    std::printf(" (%zu already in %s, resuming)", run.summary.points_present, options.output_path.c_str());
  }
  if (options.sweep.mode == TimingMode::kLatency) {
    std::printf("\n# warm-up %d, timed iterations %d per point; times are the max over all ranks\n", options.sweep.warmup_iters,
                options.sweep.iters);
  } else {
    std::printf(
        "\n# warm-up %d, %d samples per point, each the per-call average of %d..%d back-to-back calls"
        " (by size); times are the mean over all ranks\n",
        options.sweep.warmup_iters, options.sweep.iters, kPipelinedMinCalls, kPipelinedMaxCalls);
  }
  std::fflush(stdout);
}

CommRow make_row(const SweepRun& run, const PointSpec& point, const std::string& span, const std::string& backend,
                 const Measurement& measured, const stats::Summary& s) {
  CommRow row{};
  h5::set_string(row.collective, to_string(point.collective));
  h5::set_string(row.dtype, itertime::to_string(point.dtype));
  row.group_size = point.group_size;
  h5::set_string(row.layout, to_string(point.layout));
  h5::set_string(row.span, span);
  h5::set_string(row.mode, to_string(point.mode));
  h5::set_string(row.backend, backend);
  row.bytes = static_cast<int64_t>(point.bytes);
  row.count = static_cast<int64_t>(point.count);
  row.warmup_iters = run.options.sweep.warmup_iters;
  row.iters = run.options.sweep.iters;
  store::set_time_summary(row, s);
  row.algbw_GBps = s.median > 0 ? static_cast<double>(point.bytes) / (s.median * 1e3) : 0.0;
  row.busbw_GBps = row.algbw_GBps * busbw_factor(point.collective, point.group_size);
  row.check_errors = measured.check_errors;
  h5::set_string(row.measured_utc, utc_timestamp());
  return row;
}

void print_point(const SweepRun& run, std::size_t index, const std::string& span, const CommRow& row, const Measurement& measured,
                 const stats::Summary& s) {
  const PointSpec& point = run.points[index];
  const std::string check = measured.check_errors == 0 ? "ok"
                                                       : "FAILED: " + std::to_string(measured.check_errors) +
                                                             " wrong elements (" + measured.first_error + ")";
  char progress[48];
  std::snprintf(progress, sizeof(progress), "%zu/%zu", index + 1, run.points.size());
  std::printf("  %-9s %-14s %-5s %5d %-11s %-10s %10zu %9zu %12.2f %12.2f %12.2f %6.3f %11.3f %11.3f  %s\n", progress,
              to_string(point.collective).c_str(), itertime::to_string(point.dtype).c_str(), point.group_size,
              to_string(point.layout).c_str(), span.c_str(), point.bytes, point.count, s.median, s.min, s.p90, s.cv,
              row.algbw_GBps, row.busbw_GBps, check.c_str());
  std::fflush(stdout);
  if (measured.check_errors > 0) {
    // One write of the whole line: Open MPI 5's output forwarding has been seen to route the first piece
    // of a line written in several pieces to stdout (tests/e2e/calibrate.sh comm_corrupt, Debian 13).
    const std::string line = "itertime: CORRECTNESS CHECK FAILED for " + point.key() + ": " + check + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

// Rank 0 appends point `index`'s row and prints it.
void record(SweepRun& run, const Communicator& comm, const std::string& span, std::size_t index, const Measurement& measured) {
  if (measured.check_errors > 0) ++run.summary.points_failed_check;
  if (run.world_rank != 0) return;
  const PointSpec& point = run.points[index];
  const stats::Summary s = stats::summarize(measured.samples_us);
  const CommRow row = make_row(run, point, span, comm.name(), measured, s);
  append_comm_point(*run.plan.store, row, measured.samples_us);
  print_point(run, index, span, row, measured, s);
  if (run.abort_after >= 0 && static_cast<long>(run.summary.points_measured) >= run.abort_after) {
    std::fprintf(stderr, "itertime: ITERTIME_FAULT_ABORT_AFTER_POINTS=%ld reached, aborting the job\n", run.abort_after);
    MpiSession::abort_all(3);
  }
}

// Measures the missing points of todo[first..] on every rank, under the outside-load probe, until
// kLoadStretch has passed on rank 0's clock (or todo ends; the window is then held open, idle, to
// kLoadStretch); measures that stretch again while it was loaded (after a quiet moment, up to
// max_extra_tries times), then records it. Returns the next position.
std::size_t measure_stretch(SweepRun& run, Communicator& comm, BlockBuffers& buffers, const std::string& span,
                            const std::vector<std::size_t>& todo, std::size_t first) {
  const CommCalibrationOptions& options = run.options;
  std::size_t end = first;
  std::vector<Measurement> measured;
  std::vector<Measurement> failed_checks;  // per point: the first attempt whose check failed, kept
  const auto measure = [&](int attempt) {
    measured.clear();
    const auto window_start = Clock::now();
    // The first attempt finds the stretch's end (rank 0 decides, so every rank agrees); the others
    // measure the same points again.
    int more = 1;
    for (std::size_t k = first; attempt == 0 ? (k < todo.size() && more) : k < end; ++k) {
      measured.push_back(measure_point(comm, buffers, run.points[todo[k]], options.sweep.warmup_iters, options.sweep.iters));
      if (attempt == 0) {
        end = k + 1;
        more = Clock::now() - window_start < kLoadStretch ? 1 : 0;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
      }
    }
    failed_checks.resize(measured.size());
    for (std::size_t k = 0; k < measured.size(); ++k) {
      if (measured[k].check_errors > 0 && failed_checks[k].check_errors == 0) failed_checks[k] = measured[k];
    }
    std::this_thread::sleep_until(window_start + kLoadStretch);  // too short a window reads as noise
  };
  const auto report = [&](double load_cores, bool again) {
    if (run.world_rank != 0) return;
    std::printf("  outside load %.2f cores while measuring points %zu-%zu: %s\n", load_cores, todo[first] + 1, todo[end - 1] + 1,
                again ? "measuring them again" : "kept as they are");
    std::fflush(stdout);
  };
  const LoadedTries tries = run.probe.repeat_while_loaded(options.outside_load_cores, options.max_extra_tries, measure, report);
  run.summary.points_remeasured += static_cast<std::size_t>(tries.extra_tries) * (end - first);
  if (tries.stayed_loaded) run.summary.points_disturbed += end - first;
  // A check that failed in any attempt stands: a wrong result is not undone by a right one later.
  for (std::size_t k = first; k < end; ++k) {
    Measurement& kept = measured[k - first];
    const Measurement& failed = failed_checks[k - first];
    if (kept.check_errors == 0 && failed.check_errors > 0) {
      kept.check_errors = failed.check_errors;
      kept.first_error = failed.first_error;
    }
    ++run.summary.points_measured;
    record(run, comm, span, todo[k], kept);
  }
  return end;
}

// The end of the block of points that share points[begin]'s group size and layout.
std::size_t block_end(const std::vector<PointSpec>& points, std::size_t begin) {
  std::size_t end = begin;
  while (end < points.size() && points[end].group_size == points[begin].group_size &&
         points[end].layout == points[begin].layout) {
    ++end;
  }
  return end;
}

// One block per (group size, layout): its communicators are built once, then its missing points measured.
void measure_block(SweepRun& run, std::size_t begin, std::size_t end) {
  const int group_size = run.points[begin].group_size;
  const GroupLayout layout = run.points[begin].layout;
  const auto groups = layout_groups(run.world_size, group_size, layout);
  int color = 0;
  int key = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t j = 0; j < groups[g].size(); ++j) {
      if (groups[g][j] == run.world_rank) {
        color = static_cast<int>(g);
        key = static_cast<int>(j);
      }
    }
  }
  MpiComm group_comm = MpiComm::split(MPI_COMM_WORLD, color, key);
  std::unique_ptr<Communicator> comm = make_communicator(run.options.backend, group_comm.get());
  const std::string span = span_label(groups, run.nodes);
  if (run.world_rank == 0) {
    std::printf("#\n# group size %d, %s layout (%zu groups at once, %s); first group: ranks", group_size,
                to_string(layout).c_str(), groups.size(), span.c_str());
    for (int r : groups.front()) std::printf(" %d", r);
    std::printf("\n");
    print_header();
  }
  std::vector<std::size_t> todo;
  for (std::size_t index = begin; index < end; ++index) {
    if (!run.plan.present[index]) todo.push_back(index);
  }
  std::vector<PointSpec> todo_points;
  for (std::size_t index : todo) todo_points.push_back(run.points[index]);
  BlockBuffers buffers(todo_points, [&](std::size_t bytes) { return comm->allocate(bytes); });
  for (std::size_t next = 0; next < todo.size();) next = measure_stretch(run, *comm, buffers, span, todo, next);
}

}  // namespace

CommCalibrationSummary calibrate_comm(const CommCalibrationOptions& options) {
  const auto started = Clock::now();
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const std::vector<PointSpec> points = plan_points(options, world_size);
  const NodeInfo nodes = detect_nodes();
  if (options.backend == Backend::kCuda) bind_cuda_device(nodes.local_rank);

  OutsideLoadProbe probe(MPI_COMM_WORLD);
  SweepRun run{options, points, nodes, world_rank, world_size, {}, probe, -1, {}};
  run.plan =
      open_resume_plan(StoreTarget{options.output_path, options.force, options.resume, options.provenance}, point_keys(points),
                       existing_comm_keys, [&](h5::Store& store) { record_topology(store, nodes, world_size, options.backend); });
  run.summary.points_total = points.size();
  run.summary.points_present = run.plan.present_count();
  if (world_rank == 0) print_start(run);
  if (const char* text = std::getenv("ITERTIME_FAULT_ABORT_AFTER_POINTS")) run.abort_after = std::strtol(text, nullptr, 10);
  if (options.node_links) measure_node_links(run.plan.store.get(), nodes);

  // The speed reference with every rank busy (common/speed_drift.hpp), before the first block measured and
  // after each; stored, the first one printed.
  SpeedReference reference;
  bool probed = false;
  const auto probe_speed = [&]() {
    const ReferenceSample sample = reference.measure(MPI_COMM_WORLD, ReferenceStage::kComm, 0);
    if (world_rank == 0) record_reference(*run.plan.store, {sample}, probed ? "" : "before the first block");
    probed = true;
  };
  for (std::size_t index = 0; index < points.size();) {
    const std::size_t end = block_end(points, index);
    const bool block_needed = std::any_of(run.plan.present.begin() + static_cast<long>(index),
                                          run.plan.present.begin() + static_cast<long>(end), [](uint8_t p) { return p == 0; });
    if (block_needed) {
      if (!probed) probe_speed();
      measure_block(run, index, end);
      probe_speed();
    }
    index = end;
  }

  CommCalibrationSummary& summary = run.summary;
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (world_rank == 0) {
    std::printf("#\n# %zu points measured, %zu already present, %zu of %zu in %s; %zu failed their check; %.1f s\n",
                summary.points_measured, summary.points_present, summary.points_measured + summary.points_present,
                summary.points_total, options.output_path.c_str(), summary.points_failed_check, summary.elapsed_s);
    std::printf("# outside load: %zu point(s) measured again, %zu kept while still loaded (above %.2f cores)\n",
                summary.points_remeasured, summary.points_disturbed, options.outside_load_cores);
  }
  MPI_Bcast(&summary.points_failed_check, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  return summary;
}

}  // namespace itertime::calibrate
