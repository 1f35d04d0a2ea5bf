// fitted_model_archive.hpp: the Boost.Serialization of the fitted model and its parts (free serialize
// functions, found by argument-dependent lookup). PRIVATE to the model room: included only by
// model/fitted_model_io.cpp and by the serialization tests that check the archive text
// (tests/predict/test_serialization.cpp); no public predict header includes Boost (tests/layering checks
// both).
// Invariants:
//  - The archive text is the one the types' former member functions wrote (kFittedModelVersion 7), field
//    for field and class version for class version (CommModel's was 1), so saved models load unchanged.
//    Placement on nodes came later as class versions: CommKey 1 adds its nodes and ranks per node, CommModel
//    2 the calibration's node of each rank; a model saved before (CommKey 0, CommModel 1) loads as one node.
//  - Phases, comm kinds, dtypes, collectives, group layouts, the backend and the attention kernel are
//    written as their canonical names and parsed back (aliases such as "float32" load too); a model
//    whose backend was not recorded holds "unknown".
//  - Saving never changes the object; loading replaces every field it reads.
#pragma once

#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>
#include <boost/serialization/version.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/attention.hpp"
#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "common/phase.hpp"
#include "predict/device/comm_model.hpp"
#include "predict/device/op_regression.hpp"
#include "predict/device/operator_roofline.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/model/stage_ops.hpp"

namespace itertime::predict {

// A typed term archived as its name: `to_name` on saving, `from_name` on loading.
template <class Archive, class T, class ToName, class FromName>
void archive_as_name(Archive& archive, T& value, ToName to_name, FromName from_name) {
  std::string name;
  if constexpr (Archive::is_saving::value) name = to_name(value);
  archive& name;
  if constexpr (Archive::is_loading::value) value = from_name(name);
}

template <class Archive>
void archive_phase(Archive& archive, Phase& phase) {
  archive_as_name(
      archive, phase, [](Phase p) { return to_string(p); }, [](const std::string& s) { return parse_phase(s); });
}

template <class Archive>
void archive_dtype(Archive& archive, DType& dtype) {
  archive_as_name(
      archive, dtype, [](DType d) { return to_string(d); }, [](const std::string& s) { return parse_dtype(s); });
}

// --- device models (predict/device/) ---

template <class Archive>
void serialize(Archive& archive, CommKey& key, unsigned version) {
  archive_as_name(
      archive, key.collective, [](Collective c) { return to_string(c); },
      [](const std::string& s) { return parse_collective(s); });
  archive_dtype(archive, key.dtype);
  archive& key.group_size;
  archive_as_name(
      archive, key.layout, [](GroupLayout l) { return to_string(l); },
      [](const std::string& s) { return parse_group_layout(s); });
  if (version >= 1) {
    archive& key.nodes& key.ranks_per_node;
  } else if constexpr (Archive::is_loading::value) {
    key.nodes = 1;  // saved before placements were keyed: a one-node calibration
    key.ranks_per_node = key.group_size;
  }
}

template <class Archive>
void serialize(Archive& archive, CommTable& table, unsigned /*version*/) {
  archive& table.bytes& table.measured_time_us& table.time_us& table.alpha_us& table.us_per_byte& table.fit_points& table
      .fit_mape_pct;
}

// CommModel's state through its accessors and its restoring constructor.
template <class Archive>
void serialize(Archive& archive, CommModel& model, unsigned version) {
  if constexpr (Archive::is_saving::value) {
    archive& model.tables();
    const int64_t rows_used = model.rows_used(), rows_ignored = model.rows_ignored();
    archive& rows_used& rows_ignored;
    archive& model.node_of_rank();
  } else {
    std::map<CommKey, CommTable> tables;
    int64_t rows_used = 0, rows_ignored = 0;
    std::vector<int> node_of_rank;  // version 1: one node
    archive& tables& rows_used& rows_ignored;
    if (version >= 2) archive& node_of_rank;
    model = CommModel(std::move(tables), rows_used, rows_ignored, std::move(node_of_rank));
  }
}

template <class Archive>
void serialize(Archive& archive, OpRegression& regression, unsigned /*version*/) {
  archive& regression.intercept_us& regression.us_per_flop& regression.us_per_byte& regression.points;
}

template <class Archive>
void serialize(Archive& archive, RegressionCheck& check, unsigned /*version*/) {
  archive& check.fit_points& check.held_out_points& check.mape_pct& check.held_out_time_us& check.reach;
}

template <class Archive>
void serialize(Archive& archive, ClassEfficiency& efficiency, unsigned /*version*/) {
  archive& efficiency.efficiency& efficiency.floor_us& efficiency.points& efficiency.fit_rms_log;
}

template <class Archive>
void serialize(Archive& archive, OperatorRoofline& roofline, unsigned /*version*/) {
  archive& roofline.matrix& roofline.attention& roofline.memory& roofline.fitted_on& roofline.fitted_from;
}

template <class Archive>
void serialize(Archive& archive, TransferCheck& check, unsigned /*version*/) {
  archive& check.fit_occupancy& check.check_occupancy& check.calls& check.mape_pct& check.time_weighted_mape_pct& check
      .class_time_weighted_mape_pct;
}

// --- the fitted model (predict/model/) ---

template <class Archive>
void serialize(Archive& archive, OpInfo& info, unsigned /*version*/) {
  archive& info.name& info.signature& info.input_dtypes& info.output_dtype& info.flops& info.bytes;
}

template <class Archive>
void serialize(Archive& archive, SequenceEntry& entry, unsigned /*version*/) {
  archive_phase(archive, entry.phase);
  archive& entry.signature_id& entry.count;
}

template <class Archive>
void serialize(Archive& archive, CommOp& op, unsigned /*version*/) {
  archive_phase(archive, op.phase);
  archive_as_name(
      archive, op.kind, [](CommKind k) { return to_string(k); }, [](const std::string& s) { return parse_comm_kind(s); });
  archive_dtype(archive, op.dtype);
  archive& op.bytes& op.count;
}

template <class Archive>
void serialize(Archive& archive, StageOps& stage, unsigned /*version*/) {
  archive& stage.sequence& stage.comms& stage.local_params;
}

template <class Archive>
void serialize(Archive& archive, Calibration& calibration, unsigned /*version*/) {
  archive& calibration.op_overhead_us& calibration.factor& calibration.rows;
}

template <class Archive>
void serialize(Archive& archive, CalibrationSet& set, unsigned /*version*/) {
  archive& set.per_occupancy;
}

template <class Archive>
void serialize(Archive& archive, FittedModel& model, unsigned /*version*/) {
  archive& model.source_file;
  archive_as_name(
      archive, model.backend, [](const std::optional<Backend>& b) { return b ? to_string(*b) : std::string("unknown"); },
      [](const std::string& s) { return s.empty() || s == "unknown" ? std::nullopt : std::optional<Backend>(parse_backend(s)); });
  archive& model.comm& model.signatures& model.signature_ids& model.op_time_us& model.stages& model.regressions& model
      .regression_checks& model.occupancies& model.rank_slots& model.node_ranks;
  archive_as_name(
      archive, model.attention, [](AttentionKernel k) { return to_string(k); },
      [](const std::string& s) { return parse_attention(s); });
  archive& model.libtorch_version& model.hardware& model.roofline& model.roofline_transfer& model.calibration& model
      .calibration_blind;
}

}  // namespace itertime::predict

BOOST_CLASS_VERSION(itertime::predict::CommKey, 1)
BOOST_CLASS_VERSION(itertime::predict::CommModel, 2)
