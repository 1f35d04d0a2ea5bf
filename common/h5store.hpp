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
//    h5dump and h5py read them without our code.
//  - Crash consistency: a writable Store for path P writes to a working copy W beside it (P.itertime-wip,
//    same folder), never to P. A commit flushes W, copies W's bytes to P.itertime-commit and renames that
//    file onto P (atomic), so P is always a whole file as of some commit: a process killed at any
//    instant (SIGKILL included) leaves P as it was before or after one commit. Opening for writing
//    (--resume) always rebuilds W from P (a W left by a killed writer is discarded, and so is its
//    P.itertime-commit, which is never read); create() writes W
//    and commits, so a killed create leaves no P (or, with `force`, the old P until the new one is
//    committed). Closing removes W. No fsync: P survives the death of the process, not of the machine
//    (a power loss may leave the last commits, or with an old kernel a renamed file's data, unwritten).
//  - Every write (append, truncate, set_meta, remove, a new table) commits before it returns, so a
//    killed job loses at most the rows not yet appended; writes inside a Store::Transaction commit once,
//    together, when it ends (append_with_children: child spans and their parent row; never a parent
//    without its children, nor children without their parent, on disk). A transaction left by an
//    exception is not committed, and the store commits nothing after it (its W holds a partial write).
//    SIGTERM, SIGINT and SIGHUP wait for a write or transaction in progress, with its commit, to finish
//    (common/signal_deferral.hpp). ITERTIME_TEST_COMMIT_PAUSE_US (a test hook: the fault harness,
//    launcher/scripts/fault-harness.sh) pauses that many microseconds inside appends and at each step of
//    a commit, to widen the windows a kill can land in.
//  - Opening an existing table checks that its field names equal the expected ones (a schema check).
//  - New stores are written in HDF5 1.8's file format, whose superblock and object headers carry
//    checksums, and every table chunk carries a Fletcher-32 checksum; so a file damaged after it was
//    written fails a checksum instead of being read as garbage (stores written before this format, in
//    HDF5's earliest one, are still read and appended to in their own format, unchecked).
//  - One writer per file: a writable Store holds an exclusive flock(2) on its working copy W (WriterLock,
//    taken before W is rebuilt or created, held until W is removed), a file that is never renamed (P's
//    inode changes at every commit), so a second job on the same file, a second writable Store of it in
//    one process, and create --force of a file another process is writing, are refused with one line
//    ("another process is writing it") and touch nothing. Readers open P and take no lock (HDF5's own
//    flock is switched off, HDF5 >= 1.10.7): `inspect`, validate and h5py read a file while a
//    calibration appends to it, seeing every row committed so far, always in a whole file (a reader
//    keeps the P it opened; the next commit replaces the name, not its bytes). Where HDF5's locking
//    cannot be switched off (older HDF5, or HDF5_USE_FILE_LOCKING set to other than FALSE), HDF5's own
//    exclusive lock on W, taken when W opens, refuses a second writer instead (a second writer racing
//    the first one's rebuild of W is not refused there).
//  - HDF5's own error stack printing is switched off. A failed write is an InternalError; a failed read
//    of a file that opened and passed the schema check, and a table whose stored dimension or row spans
//    cannot be right, mean a damaged file: a UserError (damaged_file) naming the file and what failed.
//    Table::read refuses a dimension larger than the dataset's stored bytes allow before allocating.
#pragma once

#include <H5Cpp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/errors.hpp"
#include "common/signal_deferral.hpp"

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
#define ITERTIME_H5_FIELD(row_type, Row, member) (row_type).add<decltype(Row::member)>(#member, offsetof(Row, member))

// Adds the listed members of `Row`, in the order given, each under its own name: the list form of
// ITERTIME_H5_FIELD, so that a row type reads as its list of columns,
//   ITERTIME_H5_FIELDS(type, CommRow, collective, dtype, group_size);
// How: a local class derived from Row names the members inside one of its member functions, where the
// bare names are expressions (its own inherited members), so one std::tie-like pass gets each member's
// type and offset (its address less the Row's), and the stringized list gives the names. Row is a
// concrete struct (not a template parameter: a dependent base's members are not found by their names).
#define ITERTIME_H5_FIELDS(row_type, Row, ...)                                                                                \
  do {                                                                                                                        \
    struct ItertimeH5Members : Row {                                                                                          \
      void add_to(::itertime::h5::RowType& itertime_h5_row_type) const {                                                      \
        ::itertime::h5::detail::add_members(itertime_h5_row_type, static_cast<const Row&>(*this), #__VA_ARGS__, __VA_ARGS__); \
      }                                                                                                                       \
    };                                                                                                                        \
    ItertimeH5Members{}.add_to(row_type);                                                                                     \
  } while (false)

// The row type of `Row` with exactly the listed members, as an expression: the usual body of
// row_type_of(RowTag<Row>), `return ITERTIME_H5_ROW_TYPE(CommRow, collective, dtype, group_size);`.
#define ITERTIME_H5_ROW_TYPE(Row, ...)                             \
  [] {                                                             \
    ::itertime::h5::RowType itertime_h5_row_type_of(sizeof(Row));  \
    ITERTIME_H5_FIELDS(itertime_h5_row_type_of, Row, __VA_ARGS__); \
    return itertime_h5_row_type_of;                                \
  }()

class Shadow;

// An untyped handle to one extendable table dataset. `shadow`: the writable store's commits (null when
// read-only); `path`: the store's path, for messages.
class TableHandle {
 public:
  TableHandle(std::shared_ptr<Shadow> shadow, std::string path, H5::H5File file, H5::DataSet dataset, H5::DataType memory_type,
              std::size_t row_bytes);
  std::size_t rows() const;
  // Refuses (damaged_file) reading `count` rows when the dataset's stored bytes cannot hold them.
  void check_readable(std::size_t count) const;
  void append(const void* rows, std::size_t count);
  void read(void* out, std::size_t first, std::size_t count) const;
  // Shrinks the table to `count` rows (used by --resume to drop a partly written tail).
  void truncate(std::size_t count);

 private:
  std::shared_ptr<Shadow> shadow_;  // declared first: outlives the HDF5 handles below (W is removed last)
  std::string path_;
  H5::H5File file_;
  H5::DataSet dataset_;
  H5::DataType memory_type_;
  std::size_t row_bytes_;
};

// Names a row type in an overload: a plain struct Row is stored as `row_type_of(RowTag<Row>{})`, a
// function declared beside Row, in Row's namespace (where argument-dependent lookup finds it), whose
// body describes Row (usually `return ITERTIME_H5_ROW_TYPE(Row, ...)`).
template <typename Row>
struct RowTag {};

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
  std::string element;              // "compound" or the numeric type
};

// An exclusive flock(2) on a store's working copy (see the invariants) for as long as a writable Store
// holds it. Empty (no lock) where HDF5 locks by itself.
class WriterLock {
 public:
  WriterLock() = default;
  // Locks `work_path` (creating it when missing) for the store at `store_path`; throws UserError naming
  // the store when another writer holds it, in this process or another.
  static WriterLock acquire(const std::string& store_path, const std::string& work_path);
  WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// A writable store's working copy and commits (see the invariants); shared by the Store and its tables.
class Shadow {
 public:
  Shadow(std::string path, std::string work_path, WriterLock lock, H5::H5File file);
  ~Shadow();  // closes W in HDF5 (once no table holds it), removes it, then releases the lock
  Shadow(const Shadow&) = delete;
  Shadow& operator=(const Shadow&) = delete;
  // After a write to W: commits it, or, inside a transaction, leaves it for the transaction's end.
  void written();
  void begin_transaction();
  // `committing`: false when an exception left the transaction (nothing more is ever committed).
  void end_transaction(bool committing);
  // Flushes W and replaces P with a copy of it. Throws InternalError after an abandoned transaction.
  void commit();
  // The test hook's pause (ITERTIME_TEST_COMMIT_PAUSE_US); nothing when it is unset.
  void test_pause() const;

 private:
  std::string path_;
  std::string work_path_;
  WriterLock lock_;
  H5::H5File file_;
  int depth_ = 0;
  bool dirty_ = false;
  bool abandoned_ = false;
  long pause_us_ = 0;
};

// Path of the working copy of the store at `path` (see the invariants).
std::string work_path_of(const std::string& path);

class Store {
 public:
  // Writes inside it commit once, when it ends without an exception (see the invariants); nests. SIGTERM,
  // SIGINT and SIGHUP wait for it to end. A no-op on a read-only store.
  class Transaction {
   public:
    explicit Transaction(Store& store);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

   private:
    std::shared_ptr<Shadow> shadow_;
    int uncaught_ = 0;
    std::unique_ptr<SignalDeferral> deferral_;  // held from before the first write until after the commit
  };

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
    return Table<Row>(open_table(path, row_type_of(RowTag<Row>{}), chunk_rows));
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
  // Commits what was written (writable stores; nothing else to do on a read-only one).
  void flush();

 private:
  Store(std::shared_ptr<Shadow> shadow, H5::H5File file, std::string path, bool writable);
  // After a write: commits it (or leaves it to the open transaction).
  void written();
  // One /meta attribute write (both set_meta overloads): `write` writes it into the /meta group.
  void write_meta(const std::function<void(H5::Group&)>& write);
  TableHandle open_table(const std::string& path, const RowType& row_type, std::size_t chunk_rows);
  TableHandle open_existing_table(const std::string& path, const RowType& row_type, std::size_t row_bytes);
  // Creates the empty extendable dataset at `path` (and the groups above it), of `stored_type`, in one
  // commit: the one creation of compound tables and sample arrays alike. `what` names it in errors.
  H5::DataSet create_dataset(const std::string& path, const H5::DataType& stored_type, std::size_t chunk_rows,
                             const std::string& what);

  std::shared_ptr<Shadow> shadow_;  // writable stores; declared before file_: W is removed after it closes
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
template <>
struct NativeType<int64_t> {
  static H5::DataType get() { return H5::PredType::NATIVE_INT64; }
};
template <>
struct NativeType<int32_t> {
  static H5::DataType get() { return H5::PredType::NATIVE_INT32; }
};
template <>
struct NativeType<uint8_t> {
  static H5::DataType get() { return H5::PredType::NATIVE_UINT8; }
};
template <>
struct NativeType<double> {
  static H5::DataType get() { return H5::PredType::NATIVE_DOUBLE; }
};
template <>
struct NativeType<float> {
  static H5::DataType get() { return H5::PredType::NATIVE_FLOAT; }
};
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

// ---- implementation of ITERTIME_H5_FIELDS -------------------------------------------------------
namespace detail {
// "a, b, c" (a stringized member list) -> {"a", "b", "c"}.
std::vector<std::string> split_member_list(const char* list);

template <typename Row, typename... Member>
void add_members(RowType& type, const Row& row, const char* names, const Member&... members) {
  static_assert(std::is_standard_layout_v<Row>, "a row type is a plain struct");
  const std::vector<std::string> split = split_member_list(names);
  ITERTIME_CHECK(split.size() == sizeof...(Member), std::string("ITERTIME_H5_FIELDS: one name per member in ") + names);
  const char* base = reinterpret_cast<const char*>(&row);
  std::size_t next = 0;
  (type.add<Member>(split[next++], static_cast<std::size_t>(reinterpret_cast<const char*>(&members) - base)), ...);
}
}  // namespace detail

}  // namespace itertime::h5
