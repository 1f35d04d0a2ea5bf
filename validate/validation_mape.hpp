// validation_mape.hpp: the MAPE `itertime validate` stored in a calibration file's /validation, read
// back as the range a calibrated prediction can quote (issue 33). Reads only; never throws for a file
// that has no /validation (an older calibration, a fitted model file, a file not yet validated).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace itertime::validate {

struct StoredMape {
  double mape_pct = 0;
  int64_t count = 0;   // the configurations it was measured on
  std::string group;   // "amp-bf16" (the precision's group) or "overall"
  bool built = false;  // the builder-only predictions' MAPE (for a prediction with built stages)
};

// The precision's group when /validation/mape has it with rows, else the overall one; with `built`,
// the builder-only MAPE of that group when it has builder-only rows (else the traced one, built false).
// nullopt when `path` is no HDF5 file or holds no /validation/mape.
std::optional<StoredMape> read_validation_mape(const std::string& path, const std::string& precision, bool built);

}  // namespace itertime::validate
