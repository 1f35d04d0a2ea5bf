// fitted_model.hpp: everything prediction needs, fitted from one calibration file (cluster.h5): the
// communication model, the profiled operator times per occupancy, the traced operator sequences of every
// pipeline stage (precision-aware and precision-blind), a regression per (operator, dtype) for operators
// without a usable profile, and a calibration factor per occupancy fitted on ground truth. The data type
// and its save / load; the fitting is predict/fit_model.hpp's.
// Invariants:
//  - save_model() writes a text archive (Boost.Serialization, private to model/fitted_model_io.cpp) that
//    starts with the format name and kFittedModelVersion; load_model() refuses another version (UserError
//    naming both) and anything that is not such a file.
//  - Calibration factors are fitted from every ground-truth tuple given, per occupancy; validation refits
//    them leave-one-tuple-out (see predictor.hpp), never scoring a configuration its own factor saw.
//  - Phases, comm kinds, dtypes, the backend and the attention kernel are enums in memory and their
//    canonical names in the archive (the text the archive held before they were enums; a backend the
//    calibration did not record is "unknown").
//  - A FittedModel is immutable once fitted or loaded: it holds no cache (resolver/stage_resolver.hpp owns those).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/attention.hpp"
#include "common/dtype.hpp"
#include "common/precision.hpp"
#include "predict/device/comm_model.hpp"
#include "predict/device/op_regression.hpp"
#include "predict/device/operator_roofline.hpp"
#include "predict/model/stage_ops.hpp"

namespace itertime::predict {

inline constexpr int kFittedModelVersion = 7;  // 2: non-negative regressions and their checks; 3: rank_slots;
                                               // 4: the calibration's attention kernel and LibTorch version;
                                               // 5: no global calibration (the nearest occupancy's instead);
                                               // 6: the hardware description the devices matched
                                               // 7: the operator roofline (operator_roofline.hpp) and its transfer checks

struct OpInfo {
  std::string name;
  std::string signature;     // the tracer's canonical text (calibrate/op_tracer.hpp)
  std::string input_dtypes;  // as stored: an opaque grouping key (common/calibration_records.hpp)
  std::string output_dtype;
  double flops = 0, bytes = 0;
};

// The key of an operator's regression group (FittedModel::regressions): its name and its input dtypes
// as /ops/signatures stores them ("aten::mm|fp32,fp32").
inline std::string regression_key(const std::string& name, const std::string& stored_input_dtypes) {
  return name + "|" + stored_input_dtypes;
}

// Terms fitted on ground truth: a framework overhead per operator call (dispatch and autograd
// bookkeeping that an operator timed in isolation does not pay) and a multiplicative factor, per
// occupancy; `global` is fitted on every occupancy and used where an occupancy has no ground truth.
struct Calibration {
  double op_overhead_us = 0.0;
  double factor = 1.0;
  int64_t rows = 0;  // ground-truth configurations it was fitted on (0: identity)
};

// One fitted term of the ground-truth calibration: its name ("op_overhead_us", "ln_factor",
// "ln_contention@OCCUPANCY"), its described value (the prior), the fitted value and one standard deviation.
struct FittedCalibrationTerm {
  std::string name;
  double described = 0, fitted = 0, sigma = 0;
};

// The terms fitted on ground truth, per occupancy (busy ranks). A prediction at an occupancy nothing was
// fitted at (leave-one-tuple-out of the only tuple at that occupancy, or a world larger than the
// calibration's) takes the nearest fitted occupancy's terms, the lower one on a tie: contention grows
// with the busy ranks, so a neighbour is closer than a fit over every occupancy at once.
struct CalibrationSet {
  std::map<int64_t, Calibration> per_occupancy;
  // The occupancy whose terms a prediction at `occupancy` uses; -1 when nothing was fitted.
  int64_t source_occupancy(int64_t occupancy) const;
  // Those terms; the identity (no overhead, factor 1, rows 0) when nothing was fitted.
  const Calibration& for_occupancy(int64_t occupancy) const;
};

struct FittedModel {
  std::string source_file;
  std::optional<Backend> backend;  // /meta `backend`; nullopt when the calibration did not record it
  CommModel comm;
  std::map<int64_t, OpInfo> signatures;
  std::map<std::string, int64_t> signature_ids;                                  // signature text -> id
  std::map<std::pair<int64_t, int64_t>, double> op_time_us;                      // (signature id, occupancy) -> median
  std::map<std::string, StageOps> stages;                                        // stage key (common/ops_store.hpp)
  std::map<std::pair<std::string, int64_t>, OpRegression> regressions;           // ("name|dtypes", occupancy)
  std::map<std::pair<std::string, int64_t>, RegressionCheck> regression_checks;  // same keys, groups of >= kMinCheckPoints
  std::vector<int64_t> occupancies;
  // CPU ranks that can compute at once on the calibrated node (cores online / LibTorch threads per rank),
  // for single-node CPU calibrations; 0 otherwise (GPUs: one rank per device, nothing shared).
  double rank_slots = 0;
  double node_ranks = 0;  // ranks the calibration ran on its one node; sharing is modelled up to that many
  // How the calibration ran (calibrate/recipe_stamp.hpp): stages built for untraced shapes follow it.
  AttentionKernel attention = AttentionKernel::kEager;
  std::string libtorch_version;  // "" for files from before it was stored (LibTorch 1.13)
  // The data/hardware description the calibrated devices matched (/meta `hardware`): "" when the file
  // names none (written before it was stored, or `none`: no description matched).
  std::string hardware;
  // The transferable operator model fitted on /ops against that description at the lowest profiled
  // occupancy (empty when the file names no description this build ships, or the description lacks a
  // figure it needs), and how it predicts each other profiled occupancy.
  OperatorRoofline roofline;
  std::vector<TransferCheck> roofline_transfer;
  CalibrationSet calibration;        // precision-aware predictions
  CalibrationSet calibration_blind;  // the precision-blind baseline gets the same treatment
};

// What the calibrated LibTorch could run (fp16 products on cpu from LibTorch 2.x on).
BackendCapabilities backend_capabilities(const FittedModel& model);

// The upward extrapolation checks of every regression group, pooled (op_regression.hpp).
PooledCheck pooled_regression_check(const FittedModel& model);

// Writes `model` to `path` (UserError when it exists and `force` is false); never leaves a half-written
// file under that name. Defined in fitted_model_io.cpp with the archive.
void save_model(const FittedModel& model, const std::string& path, bool force);
// Reads a model save_model() wrote; UserErrors for a missing file, another version, a foreign or damaged one.
FittedModel load_model(const std::string& path);

}  // namespace itertime::predict
