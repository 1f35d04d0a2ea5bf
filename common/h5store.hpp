// h5store.hpp: RAII over the HDF5 C++ API for itertime's one-file-per-cluster store.
// Invariants:
//  - Every store carries /meta with an integer attribute `schema_version`. open() accepts every version
//    from kOldestReadableSchemaVersion (4) to kSchemaVersion (6), and refuses any other version (or none)
//    with a UserError naming the versions, before anything is written. 4 -> 5 only added
//    /groundtruth/configs `recipe`, and 5 -> 6 only added its `cp` and `vp` (after `pp`):
//    read_groundtruth_rows (common/groundtruth_store.hpp) reads an older file's rows with the row type of
//    its version, as recipe "" (plain) in a schema-4 file and cp = vp = 1 in schema-4 and -5 files, and
//    ground truth is only ever added to a schema-6 file (append_groundtruth and existing_groundtruth_keys
//    refuse the others); every other table is the same in all three, so the rest of an older file is
//    read and written as before. A file keeps the version it was created with.
//  - create() never replaces an existing file unless `force` is set; a refused create touches nothing.
//  - Tables are 1-D, chunked, unlimited datasets of plain HDF5 compound (or native numeric) types, so
//    h5dump and h5py read them without our code. append() extends, writes and flushes the file, so a
//    killed job loses at most the rows not yet appended; SIGTERM, SIGINT and SIGHUP wait for a write in
//    progress (append, truncate, set_meta) to finish (common/signal_deferral.hpp).
//  - Opening an existing table checks that its field names equal the expected ones (a schema check).
//  - New stores are written in HDF5 1.8's file format, whose superblock and object headers carry
//    checksums, and every table chunk carries a Fletcher-32 checksum; so a file damaged after it was
//    written fails a checksum instead of being read as garbage (stores written before this format, in
//    HDF5's earliest one, are still read and appended to in their own format, unchecked).
//  - One writer per file: a writable Store holds an exclusive flock(2) on its file (WriterLock, taken
//    before HDF5 opens or truncates it, released after HDF5 closes it), so a second job on the same file,
//    and create --force of a file another process is writing, are refused with one line ("another
//    process is writing it") and touch nothing. HDF5's own flock is switched off (HDF5 >= 1.10.7), so
//    readers take no lock: `inspect`, validate and h5py (locking=False) read a file while a calibration
//    appends to it, seeing every row appended so far (each append is flushed). Where HDF5's locking
//    cannot be switched off (older HDF5, or HDF5_USE_FILE_LOCKING set to other than FALSE), HDF5 locks
//    as before and readers wait for the writer to end.
//  - HDF5's own error stack printing is switched off. A failed write is an InternalError; a failed read
//    of a file that opened and passed the schema check, and a table whose stored dimension or row spans
//    cannot be right, mean a damaged file: a UserError (damaged_file) naming the file and what failed.
//    Table::read refuses a dimension larger than the dataset's stored bytes allow before allocating.
#pragma once

#include <H5Cpp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/errors.hpp"

namespace itertime::h5 {

// The UserError for a file that cannot be what itertime wrote: "<path>: damaged: <what>; ...".
UserError damaged_file(const std::string& path, const std::string& what);
// Checks that rows [offset, offset + count) lie inside a table of `table_rows` rows (a parent row's span
// of a child table); a span that does not is a damaged file.
void check_span(const std::string& path, const std::string& table, int64_t offset, int64_t count, std::size_t table_rows);

// 2: /groundtruth/ranks gained peak_tensor_bytes; 3: measurement rounds; 4: /groundtruth/ranks gained the
// allocator's peak allocated and reserved; 5: /groundtruth/configs gained `recipe` (the training techniques);
// 6: /groundtruth/configs gained `cp` and `vp` (context-parallel degree, virtual pipeline stages).
inline constexpr int64_t kSchemaVersion = 6;
inline constexpr int64_t kOldestReadableSchemaVersion = 4;  // still opened, see the invariants above

// Describes a compound row type field by field. Supported members: int64_t, int32_t, double, float,
// uint8_t and char[N] (fixed-length, NUL-padded strings).
class RowType {
 public:
  explicit RowType(std::size_t row_bytes);
  template <typename Member>
  RowType& add(const std::string& name, std::size_t offset);
  const H5::CompType& type() const { return type_; }
  std::size_t row_bytes() const { return row_bytes_; }
  const std::vector<std::string>& field_names() const { return names_; }

 private:
  void insert(const std::string& name, std::size_t offset, const H5::DataType& member_type);
  H5::CompType type_;
  std::size_t row_bytes_;
  std::vector<std::string> names_;
};

// Adds struct member `member` of `Row` to `row_type` under its own name.
#define ITERTIME_H5_FIELD(row_type, Row, member) \
  (row_type).add<decltype(Row::member)>(#member, offsetof(Row, member))

// An untyped handle to one extendable table dataset.
class TableHandle {
 public:
  TableHandle(H5::H5File file, H5::DataSet dataset, H5::DataType memory_type, std::size_t row_bytes);
  std::size_t rows() const;
  // Refuses (damaged_file) reading `count` rows when the dataset's stored bytes cannot hold them.
  void check_readable(std::size_t count) const;
  void append(const void* rows, std::size_t count);
  void read(void* out, std::size_t first, std::size_t count) const;
  // Shrinks the table to `count` rows (used by --resume to drop a partly written tail).
  void truncate(std::size_t count);

 private:
  H5::H5File file_;
  H5::DataSet dataset_;
  H5::DataType memory_type_;
  std::size_t row_bytes_;
};

// Rows of a plain struct. RowTraits<Row>::row_type() must describe Row (see ITERTIME_H5_FIELD).
template <typename Row>
struct RowTraits;

template <typename Row>
class Table {
 public:
  explicit Table(TableHandle handle) : handle_(std::move(handle)) {}
  std::size_t size() const { return handle_.rows(); }
  void append(const Row& row) { handle_.append(&row, 1); }
  void append(const std::vector<Row>& rows) {
    if (!rows.empty()) handle_.append(rows.data(), rows.size());
  }
  std::vector<Row> read_all() const { return read(0, size()); }
  std::vector<Row> read(std::size_t first, std::size_t count) const {
    handle_.check_readable(first + count);
    std::vector<Row> rows(count);
    if (count > 0) handle_.read(rows.data(), first, count);
    return rows;
  }
  void truncate(std::size_t count) { handle_.truncate(count); }

 private:
  TableHandle handle_;
};

struct DatasetInfo {
  std::string path;
  std::size_t rows = 0;
  std::vector<std::string> fields;  // empty for numeric arrays
  std::string element;             // "compound" or the numeric type
};

// An exclusive flock(2) on a store's file for as long as a writable Store holds it (see the invariants).
// Empty (no lock) where HDF5 locks by itself, or when this process already holds the file's lock.
class WriterLock {
 public:
  WriterLock() = default;
  // Throws UserError when another process holds the lock. `create`: make the file when it is missing.
  static WriterLock acquire(const std::string& path, bool create);
  WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

class Store {
 public:
  // Creates a new store. Refuses (UserError) an existing path unless `force`. Writes /meta with the
  // schema version and `provenance` as string attributes.
  static Store create(const std::string& path, bool force, const std::map<std::string, std::string>& provenance);
  // Opens an existing store for reading, or for appending (--resume). Checks the schema version.
  static Store open(const std::string& path, bool writable);
  // Opens `path` for appending when it exists and `resume` is set, creates it otherwise (refusing an
  // existing file unless `force`). The usual entry point of calibration commands.
  static Store create_or_resume(const std::string& path, bool force, bool resume,
                                const std::map<std::string, std::string>& provenance);

  const std::string& path() const { return path_; }
  int64_t schema_version() const;
  bool writable() const { return writable_; }

  std::map<std::string, std::string> meta() const;  // every /meta attribute, rendered as text
  void set_meta(const std::string& name, const std::string& value);
  void set_meta(const std::string& name, int64_t value);

  bool exists(const std::string& object_path) const;
  // Unlinks a dataset or group (writable stores); nothing happens when it does not exist.
  void remove(const std::string& object_path);
  void ensure_group(const std::string& group_path);

  // Opens the table at `path`, creating it when missing (writable stores only).
  template <typename Row>
  Table<Row> table(const std::string& path, std::size_t chunk_rows = 256) {
    return Table<Row>(open_table(path, RowTraits<Row>::row_type(), chunk_rows));
  }
  // Opens the existing table at `path` as `row_type`, a type laid over Row's bytes (row_bytes() ==
  // sizeof(Row)) whose fields are the stored ones: an older layout read into the current Row. The
  // members of Row that row_type lacks are not read: the caller sets them.
  template <typename Row>
  Table<Row> table(const std::string& path, const RowType& row_type) {
    return Table<Row>(open_existing_table(path, row_type, sizeof(Row)));
  }
  // A plain extendable array of doubles (raw samples), created when missing.
  Table<double> samples(const std::string& path, std::size_t chunk_rows = 4096);
  // --resume: shrinks the table or array at `path` to `rows` when it is longer (the rows a killed job
  // wrote to a child table after its last complete parent row); nothing when it is missing or not
  // longer. Writable stores only.
  void trim(const std::string& path, int64_t rows);

  // Every dataset in the file, depth first, with row counts and field names.
  std::vector<DatasetInfo> list_datasets() const;
  void flush();

 private:
  Store(WriterLock lock, H5::H5File file, std::string path, bool writable);
  TableHandle open_table(const std::string& path, const RowType& row_type, std::size_t chunk_rows);
  TableHandle open_existing_table(const std::string& path, const RowType& row_type, std::size_t row_bytes);

  WriterLock lock_;  // declared before file_: released after HDF5 has closed the file
  H5::H5File file_;
  std::string path_;
  bool writable_ = false;
};

// Fixed-length string helpers for char[N] members.
template <std::size_t N>
void set_string(char (&field)[N], const std::string& value) {
  std::size_t n = value.size() < N - 1 ? value.size() : N - 1;
  for (std::size_t i = 0; i < N; ++i) field[i] = i < n ? value[i] : '\0';
}
template <std::size_t N>
std::string get_string(const char (&field)[N]) {
  std::size_t n = 0;
  while (n < N && field[n] != '\0') ++n;
  return std::string(field, n);
}

// ---- implementation of RowType::add -------------------------------------------------------------
namespace detail {
template <typename T>
struct NativeType;
template <> struct NativeType<int64_t> { static H5::DataType get() { return H5::PredType::NATIVE_INT64; } };
template <> struct NativeType<int32_t> { static H5::DataType get() { return H5::PredType::NATIVE_INT32; } };
template <> struct NativeType<uint8_t> { static H5::DataType get() { return H5::PredType::NATIVE_UINT8; } };
template <> struct NativeType<double> { static H5::DataType get() { return H5::PredType::NATIVE_DOUBLE; } };
template <> struct NativeType<float> { static H5::DataType get() { return H5::PredType::NATIVE_FLOAT; } };
template <std::size_t N>
struct NativeType<char[N]> {
  static H5::DataType get() {
    H5::StrType type(H5::PredType::C_S1, N);
    type.setStrpad(H5T_STR_NULLPAD);
    return type;
  }
};
}  // namespace detail

template <typename Member>
RowType& RowType::add(const std::string& name, std::size_t offset) {
  insert(name, offset, detail::NativeType<std::remove_cv_t<Member>>::get());
  return *this;
}

}  // namespace itertime::h5
