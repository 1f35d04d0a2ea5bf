// validation_mape.cpp: /validation/mape read back (validation_mape.hpp).
#include "validate/validation_mape.hpp"

#include <H5Fpublic.h>

#include <cmath>
#include <exception>
#include <vector>

#include "common/h5store.hpp"
#include "validate/validation_store.hpp"

namespace itertime::validate {

std::optional<StoredMape> read_validation_mape(const std::string& path, const std::string& precision, bool built) {
  std::vector<MapeStoreRow> rows;
  try {
    if (H5Fis_hdf5(path.c_str()) <= 0) return std::nullopt;
    h5::Store store = h5::Store::open(path, /*writable=*/false);
    if (!store.exists("/validation/mape")) return std::nullopt;
    rows = store.table<MapeStoreRow>("/validation/mape", row_type_of(h5::RowTag<MapeStoreRow>{})).read_all();
  } catch (const std::exception&) {
    return std::nullopt;  // an older layout, a damaged table: no range rather than no prediction
  }
  const MapeStoreRow* chosen = nullptr;
  for (const MapeStoreRow& row : rows) {
    if (std::string(row.kind) == "precision" && std::string(row.group) == precision && row.count > 0) chosen = &row;
  }
  for (const MapeStoreRow& row : rows) {
    if (chosen == nullptr && std::string(row.kind) == "overall" && row.count > 0) chosen = &row;
  }
  if (chosen == nullptr) return std::nullopt;
  StoredMape out;
  out.group = std::string(chosen->kind) == "overall" ? "overall" : chosen->group;
  if (built && chosen->built_count > 0 && std::isfinite(chosen->built_mape_pct)) {
    out.mape_pct = chosen->built_mape_pct;
    out.count = chosen->built_count;
    out.built = true;
  } else {
    out.mape_pct = chosen->mape_pct;
    out.count = chosen->count;
  }
  return out;
}

}  // namespace itertime::validate
