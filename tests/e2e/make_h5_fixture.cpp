// make_h5_fixture: writes the HDF5 files the CLI tests need, without Python.
//   make_h5_fixture foreign PATH VERSION   a file whose /meta schema_version is VERSION (raw HDF5 API,
//                                          as another itertime version would write it)
//   make_h5_fixture store PATH             a valid itertime store with a small table and samples
#include <H5Cpp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/h5store.hpp"

namespace {

struct FixtureRow {
  int64_t bytes;
  double time_us;
  char collective[16];
};

itertime::h5::RowType row_type_of(itertime::h5::RowTag<FixtureRow>) {
  itertime::h5::RowType type(sizeof(FixtureRow));
  ITERTIME_H5_FIELD(type, FixtureRow, bytes);
  ITERTIME_H5_FIELD(type, FixtureRow, time_us);
  ITERTIME_H5_FIELD(type, FixtureRow, collective);
  return type;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "foreign" && argc == 4) {
      const int64_t version = std::strtoll(argv[3], nullptr, 10);
      H5::H5File file(argv[2], H5F_ACC_EXCL);
      H5::Group meta = file.createGroup("/meta");
      H5::Attribute attribute = meta.createAttribute("schema_version", H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR));
      attribute.write(H5::PredType::NATIVE_INT64, &version);
      return 0;
    }
    if (mode == "store" && argc == 3) {
      auto store = itertime::h5::Store::create(argv[2], false, {{"argv", "make_h5_fixture store"}, {"backend", "cpu"}});
      auto table = store.table<FixtureRow>("/comm/points");
      for (int i = 0; i < 3; ++i) {
        FixtureRow row{};
        row.bytes = int64_t{1024} << i;
        row.time_us = 10.0 * (i + 1);
        itertime::h5::set_string(row.collective, "all_reduce");
        table.append(row);
      }
      store.samples("/comm/samples").append(std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5});
      return 0;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "make_h5_fixture: %s\n", error.what());
    return 1;
  } catch (const H5::Exception& error) {
    std::fprintf(stderr, "make_h5_fixture: HDF5: %s\n", error.getDetailMsg().c_str());
    return 1;
  }
  std::fprintf(stderr, "usage: make_h5_fixture foreign PATH VERSION | make_h5_fixture store PATH\n");
  return 64;
}
