// h5store.cpp: the HDF5 store: files, /meta, typed tables (h5store.hpp).
#include "common/h5store.hpp"
#include "common/store_meta.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "common/errors.hpp"
#include "common/h5_compat.hpp"
#include "common/signal_deferral.hpp"

namespace itertime::h5 {
namespace {

constexpr const char* kMetaGroup = "/meta";
constexpr const char* kSchemaAttribute = store::meta_key::kSchemaVersion;

void silence_hdf5() {
  // HDF5 prints its error stack on every failed call by default; we report errors ourselves.
  static const bool silenced = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)silenced;
}

[[noreturn]] void rethrow_h5(const H5::Exception& error, const std::string& path, const std::string& what, const char* file,
                             int line) {
  throw InternalError("HDF5 failed to " + what + " in " + path + ": " + error.getDetailMsg() + " (" + error.getFuncName() + ")",
                      file, line);
}

// A write that fails is ours to explain (InternalError, file and line).
#define ITERTIME_H5_TRY(path, what, body)                      \
  try {                                                        \
    body;                                                      \
  } catch (const H5::Exception& h5_error_) {                   \
    rethrow_h5(h5_error_, (path), (what), __FILE__, __LINE__); \
  }

// A read of a file that opened and passed the schema check fails when the file was damaged after it was
// written (a checksum mismatch, a broken object header, a cut-off tail): the user's file, so a UserError.
#define ITERTIME_H5_READ(path, what, body)                                                 \
  try {                                                                                    \
    body;                                                                                  \
  } catch (const H5::Exception& h5_error_) {                                               \
    throw damaged_file((path), std::string(what) + " (" + h5_error_.getDetailMsg() + ")"); \
  }

// The format every new store is written in: HDF5 1.8's (superblock 2, version-2 object headers, compact
// link storage), whose metadata carries checksums; Debian 12's 1.10 and 13's 1.14 (and every h5py) read
// it. Tables add a Fletcher-32 checksum per chunk (table_properties). Not 1.10's format (superblock 3,
// checksummed chunk indexes): its superblock records an open writer durably, so the file of a killed
// job would refuse to reopen for --resume until h5clear is run on it. 1.8's chunk indexes (version-1
// B-trees) carry no checksum; a damaged one points at bytes whose signature or Fletcher-32 then fails.
H5::FileAccPropList checksummed_format() {
  H5::FileAccPropList access;
  access.setLibverBounds(H5F_LIBVER_V18, H5F_LIBVER_V18);
  return access;
}

// Whether HDF5's own flock is off for every open of a store (HDF5 >= 1.10.7, and no
// HDF5_USE_FILE_LOCKING other than FALSE in the environment, which overrides the access list). Then
// itertime locks writers itself (WriterLock); otherwise HDF5 does, as before, and readers take its shared
// lock (they cannot read beside a writer).
bool hdf5_locking_off() {
  static const bool off = [] {
    const char* env = std::getenv("HDF5_USE_FILE_LOCKING");
    if (env != nullptr && std::string(env) != "FALSE") return false;
    H5::FileAccPropList probe;
    return h5compat::disable_file_locking(probe.getId());
  }();
  return off;
}

// The access list of every open: HDF5's flock off (see hdf5_locking_off), so that `itertime inspect`,
// validate or h5py (File(..., locking=False)) read a file while a calibration appends to it (the writer
// flushes after every append), and so that a reader and a writer of one file can share a process (HDF5
// refuses one file opened twice with different locking settings); with the checksummed format's bounds
// when `checksummed`.
H5::FileAccPropList access_list(bool checksummed) {
  H5::FileAccPropList access = checksummed ? checksummed_format() : H5::FileAccPropList();
  if (hdf5_locking_off()) h5compat::disable_file_locking(access.getId());
  return access;
}

// Whether another open file description holds an exclusive flock on the working copy of the store at
// `path` (a writer has it open: WriterLock's, or HDF5's own where HDF5 still locks). A probe, not a lock:
// the shared lock it may take is released at once. This process's own writer (a Store open for
// appending) does not count: /proc/locks names the holder.
bool writer_holds(const std::string& path) {
  const std::string work = work_path_of(path);
  const int fd = ::open(work.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  if (!held) return false;
  struct stat status {};
  if (::stat(work.c_str(), &status) != 0) return true;
  // Lines read "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": the holder's pid, then major:minor:inode.
  std::ifstream locks("/proc/locks");
  std::string line;
  const std::string inode = ":" + std::to_string(status.st_ino) + " ";
  bool someone_else = false, listed = false;
  while (std::getline(locks, line)) {
    if (line.find("FLOCK") == std::string::npos || line.find(" WRITE ") == std::string::npos ||
        line.find(inode) == std::string::npos) {
      continue;
    }
    listed = true;
    std::istringstream fields(line.substr(line.find(" WRITE ") + 7));
    long pid = 0;
    fields >> pid;
    someone_else = someone_else || pid != static_cast<long>(::getpid());
  }
  return someone_else || !listed;
}

std::string being_written(const std::string& path) {
  return path + ": another process is writing it (a calibration in progress?); wait for it to end, or write to another file";
}

// Adds the per-chunk Fletcher-32 checksum to a table's creation properties.
H5::DSetCreatPropList table_properties(std::size_t chunk_rows) {
  H5::DSetCreatPropList properties;
  const hsize_t chunk[1] = {chunk_rows};
  properties.setChunk(1, chunk);
  properties.setFletcher32();
  return properties;
}

std::vector<std::string> member_names(const H5::CompType& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.getNmembers(); ++i) names.push_back(type.getMemberName(static_cast<unsigned>(i)));
  return names;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out;
}

void write_string_attribute(H5::H5Object& object, const std::string& name, const std::string& value) {
  if (object.attrExists(name)) object.removeAttr(name);
  H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
  type.setStrpad(H5T_STR_NULLTERM);
  H5::Attribute attribute = object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  attribute.write(type, value.empty() ? std::string(1, '\0') : value);
}

void write_int_attribute(H5::H5Object& object, const std::string& name, int64_t value) {
  if (object.attrExists(name)) object.removeAttr(name);
  H5::Attribute attribute = object.createAttribute(name, H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR));
  attribute.write(H5::PredType::NATIVE_INT64, &value);
}

std::string render_attribute(const H5::Attribute& attribute) {
  const H5T_class_t type_class = attribute.getTypeClass();
  if (type_class == H5T_STRING) {
    std::string value;
    attribute.read(attribute.getStrType(), value);
    while (!value.empty() && value.back() == '\0') value.pop_back();
    return value;
  }
  if (type_class == H5T_INTEGER) {
    int64_t value = 0;
    attribute.read(H5::PredType::NATIVE_INT64, &value);
    return std::to_string(value);
  }
  if (type_class == H5T_FLOAT) {
    double value = 0;
    attribute.read(H5::PredType::NATIVE_DOUBLE, &value);
    return std::to_string(value);
  }
  return "<unsupported attribute type>";
}

int64_t read_schema_version(const H5::H5File& file, const std::string& path) {
  if (!H5Lexists(file.getId(), kMetaGroup, H5P_DEFAULT)) {
    throw UserError(path + ": not an itertime store (no /meta group); pass a file written by itertime");
  }
  if (h5compat::object_type(file.getId(), kMetaGroup) != H5O_TYPE_GROUP) {
    throw UserError(path + ": /meta is not a group; the file was not written by itertime");
  }
  H5::Group meta = file.openGroup(kMetaGroup);
  if (!meta.attrExists(kSchemaAttribute)) {
    throw UserError(path + ": not an itertime store (/meta has no schema_version); pass a file written by itertime");
  }
  H5::Attribute attribute = meta.openAttribute(kSchemaAttribute);
  if (attribute.getTypeClass() != H5T_INTEGER) {
    throw UserError(path + ": /meta schema_version is not an integer; the file was not written by itertime");
  }
  int64_t version = 0;
  attribute.read(H5::PredType::NATIVE_INT64, &version);
  return version;
}

void walk(const H5::Group& group, const std::string& prefix, std::vector<DatasetInfo>& out) {
  const hsize_t count = group.getNumObjs();
  for (hsize_t i = 0; i < count; ++i) {
    const std::string name = group.getObjnameByIdx(i);
    const std::string path = prefix + "/" + name;
    const H5G_obj_t kind = group.getObjTypeByIdx(i);
    if (kind == H5G_GROUP) {
      walk(group.openGroup(name), path, out);
    } else if (kind == H5G_DATASET) {
      H5::DataSet dataset = group.openDataSet(name);
      DatasetInfo info;
      info.path = path;
      H5::DataSpace space = dataset.getSpace();
      hsize_t dims[8] = {};
      const int rank = space.getSimpleExtentNdims();
      if (rank >= 1 && rank <= 8) {
        space.getSimpleExtentDims(dims);
        info.rows = dims[0];
      } else {
        info.rows = rank == 0 ? 1 : 0;
      }
      if (dataset.getTypeClass() == H5T_COMPOUND) {
        info.element = "compound";
        info.fields = member_names(dataset.getCompType());
      } else if (dataset.getTypeClass() == H5T_FLOAT) {
        info.element = "float" + std::to_string(dataset.getFloatType().getSize() * 8);
      } else if (dataset.getTypeClass() == H5T_INTEGER) {
        info.element = "int" + std::to_string(dataset.getIntType().getSize() * 8);
      } else {
        info.element = "other";
      }
      out.push_back(info);
    }
  }
}

std::string utc_now_for_meta() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The file a commit writes before renaming it onto the store (same folder: the rename is atomic).
std::string commit_path_of(const std::string& path) { return path + ".itertime-commit"; }

[[noreturn]] void system_failure(const std::string& what, const std::string& path, const char* file, int line) {
  throw InternalError(what + " " + path + ": " + std::strerror(errno), file, line);
}

// Copies the whole of `from` into `to` (created or truncated; mode 0666 less the umask, as HDF5 creates
// files). `pause` runs half way (the test hook: a kill then leaves `to` cut off). Returns false, with
// errno set, when `from` cannot be opened or read or `to` cannot be written.
template <typename Pause>
bool copy_file(const std::string& from, const std::string& to, Pause&& pause) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return false;
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (out < 0) {
    const int saved = errno;
    ::close(in);
    errno = saved;
    return false;
  }
  struct stat status {};
  bool ok = ::fstat(in, &status) == 0;
  off_t done = 0;
  std::vector<char> buffer;
  const auto copy_to = [&](off_t end) {
    while (ok && done < end) {
      const std::size_t want = static_cast<std::size_t>(end - done);
      ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, want, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
        // Another file system, or no copy_file_range: read and write.
        if (buffer.empty()) buffer.resize(1 << 20);
        n = ::read(in, buffer.data(), std::min(buffer.size(), want));
        if (n > 0 && ::write(out, buffer.data(), static_cast<std::size_t>(n)) != n) n = -1;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0) errno = EIO;  // the file shrank under us
        ok = false;
      } else {
        done += n;
      }
    }
  };
  if (ok) {
    copy_to(status.st_size / 2);
    pause();
    copy_to(status.st_size);
  }
  const int saved = errno;
  ::close(in);
  if (::close(out) != 0 && ok)
    ok = false;
  else
    errno = saved;
  return ok;
}

long commit_pause_us() {
  const char* text = std::getenv("ITERTIME_TEST_COMMIT_PAUSE_US");
  return text == nullptr ? 0 : std::max(0L, std::atol(text));
}

}  // namespace

std::string work_path_of(const std::string& path) { return path + ".itertime-wip"; }

namespace {

// Opens the working copy `work` in HDF5 for writing (its own format kept; see Store::open).
H5::H5File open_work_copy(const std::string& work) {
  try {
    return H5::H5File(work, H5F_ACC_RDWR, H5::FileCreatPropList::DEFAULT, access_list(true));
  } catch (const H5::Exception&) {
    return H5::H5File(work, H5F_ACC_RDWR, H5::FileCreatPropList::DEFAULT, access_list(false));
  }
}

}  // namespace

// ---- damaged files ---------------------------------------------------------------------------

UserError damaged_file(const std::string& path, const std::string& what) {
  if (writer_holds(path)) {
    return UserError(path + ": changed while it was read (" + what +
                     "): another process is writing it; read it again, or wait for that job to end");
  }
  return UserError(path + ": damaged: " + what +
                   "; the file was changed or cut off after itertime wrote it: restore it from a copy, or calibrate again");
}

void check_span(const std::string& path, const std::string& table, int64_t offset, int64_t count, std::size_t table_rows) {
  if (offset < 0 || count < 0 || static_cast<uint64_t>(offset) > table_rows ||
      static_cast<uint64_t>(count) > table_rows - static_cast<uint64_t>(offset)) {
    throw damaged_file(path, "a row points at rows [" + std::to_string(offset) + ", +" + std::to_string(count) + ") of " + table +
                                 ", which has " + std::to_string(table_rows));
  }
}

// ---- RowType -----------------------------------------------------------------------------------

RowType::RowType(std::size_t row_bytes) : type_(row_bytes), row_bytes_(row_bytes) { silence_hdf5(); }

void RowType::insert(const std::string& name, std::size_t offset, const H5::DataType& member_type) {
  type_.insertMember(name, offset, member_type);
  names_.push_back(name);
}

// ---- TableHandle -------------------------------------------------------------------------------

TableHandle::TableHandle(std::shared_ptr<Shadow> shadow, std::string path, H5::H5File file, H5::DataSet dataset,
                         H5::DataType memory_type, std::size_t row_bytes)
    : shadow_(std::move(shadow)),
      path_(std::move(path)),
      file_(std::move(file)),
      dataset_(std::move(dataset)),
      memory_type_(std::move(memory_type)),
      row_bytes_(row_bytes) {}

std::size_t TableHandle::rows() const {
  hsize_t dims[1] = {0};
  ITERTIME_H5_READ(path_, "read a table's size", {
    H5::DataSpace space = dataset_.getSpace();
    if (space.getSimpleExtentNdims() != 1) throw damaged_file(path_, "a table is not one-dimensional");
    space.getSimpleExtentDims(dims);
  });
  return static_cast<std::size_t>(dims[0]);
}

void TableHandle::check_readable(std::size_t count) const {
  if (count == 0) return;
  // Rows that were appended occupy stored chunks; an extend that a killed job never wrote (--resume trims
  // it) leaves at most one append's rows unstored. A dimension beyond twice the stored bytes plus 64 MiB
  // is a damaged one: refuse it before it sizes an allocation.
  hsize_t stored_bytes = 0;
  std::size_t row_bytes = 0;
  ITERTIME_H5_READ(path_, "read a table's storage size", {
    stored_bytes = dataset_.getStorageSize();
    row_bytes = dataset_.getDataType().getSize();
  });
  const long double wanted = static_cast<long double>(count) * static_cast<long double>(row_bytes);
  if (wanted > 2.0L * static_cast<long double>(stored_bytes) + static_cast<long double>(64u << 20)) {
    throw damaged_file(path_, "a table claims " + std::to_string(count) + " rows of " + std::to_string(row_bytes) +
                                  " bytes but stores " + std::to_string(stored_bytes) + " bytes");
  }
}

void TableHandle::append(const void* rows_data, std::size_t count) {
  if (count == 0) return;
  ITERTIME_CHECK(shadow_ != nullptr, "append to a read-only store");
  const SignalDeferral whole_write;  // a SIGTERM waits for the extend, write and commit to finish
  ITERTIME_H5_TRY(path_, "append rows", {
    const hsize_t old_rows = rows();
    const hsize_t new_size[1] = {old_rows + count};
    dataset_.extend(new_size);
    shadow_->test_pause();
    H5::DataSpace file_space = dataset_.getSpace();
    const hsize_t start[1] = {old_rows};
    const hsize_t block[1] = {count};
    file_space.selectHyperslab(H5S_SELECT_SET, block, start);
    H5::DataSpace memory_space(1, block);
    dataset_.write(rows_data, memory_type_, memory_space, file_space);
  });
  shadow_->written();
}

void TableHandle::read(void* out, std::size_t first, std::size_t count) const {
  ITERTIME_CHECK(first + count <= rows(), "read past the end of a table");
  if (count == 0) return;
  ITERTIME_H5_READ(path_, "cannot read rows", {
    H5::DataSpace file_space = dataset_.getSpace();
    const hsize_t start[1] = {first};
    const hsize_t block[1] = {count};
    file_space.selectHyperslab(H5S_SELECT_SET, block, start);
    H5::DataSpace memory_space(1, block);
    dataset_.read(out, memory_type_, memory_space, file_space);
  });
}

void TableHandle::truncate(std::size_t count) {
  ITERTIME_CHECK(count <= rows(), "truncate cannot grow a table");
  ITERTIME_CHECK(shadow_ != nullptr, "truncate a table of a read-only store");
  const SignalDeferral whole_write;
  ITERTIME_H5_TRY(path_, "truncate a table", {
    const hsize_t new_size[1] = {count};
    dataset_.extend(new_size);
  });
  shadow_->written();
}

// ---- WriterLock --------------------------------------------------------------------------------

WriterLock WriterLock::acquire(const std::string& store_path, const std::string& work_path) {
  if (!hdf5_locking_off()) return WriterLock();  // HDF5 takes its own exclusive lock on W
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(work_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      throw UserError(store_path + ": cannot create " + work_path + " (" + std::strerror(errno) +
                      "); itertime writes a working copy beside the file: check the folder's permissions");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      throw UserError(being_written(store_path));
    }
    // A writer that was closing may have removed W between our open and our lock: then the lock is on a
    // file nobody else will find; take it again on the file the name now holds.
    struct stat locked {
    }, named{};
    if (::fstat(fd, &locked) == 0 && ::stat(work_path.c_str(), &named) == 0 && locked.st_dev == named.st_dev &&
        locked.st_ino == named.st_ino) {
      return WriterLock(fd);
    }
    ::close(fd);
  }
  throw UserError(being_written(store_path));
}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

// ---- Shadow ------------------------------------------------------------------------------------

Shadow::Shadow(std::string path, std::string work_path, WriterLock lock, H5::H5File file)
    : path_(std::move(path)),
      work_path_(std::move(work_path)),
      lock_(std::move(lock)),
      file_(std::move(file)),
      pause_us_(commit_pause_us()) {
  // A commit file a killed writer left (its copy cut off, or not yet renamed) is dropped: W is held
  // (this writer's flock, or HDF5's own lock since W opened), so no other writer is committing.
  std::error_code error;
  std::filesystem::remove(commit_path_of(path_), error);
}

Shadow::~Shadow() {
  try {
    file_.close();  // HDF5 closes W once no table holds it either (every table holds this Shadow)
  } catch (const H5::Exception&) {
    // Nothing to save: what was committed is in P.
  }
  std::error_code error;
  std::filesystem::remove(work_path_, error);  // still locked: no other writer is using it
  // lock_ is released after this body: a writer waiting for it finds W gone and creates its own.
}

void Shadow::test_pause() const {
  if (pause_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us_));
}

void Shadow::written() {
  dirty_ = true;
  if (depth_ == 0) commit();
}

void Shadow::begin_transaction() { ++depth_; }

void Shadow::end_transaction(bool committing) {
  ITERTIME_CHECK(depth_ > 0, "a transaction ended twice");
  if (!committing) abandoned_ = true;
  if (--depth_ == 0 && dirty_ && !abandoned_) commit();
}

void Shadow::commit() {
  if (abandoned_) {
    throw InternalError(path_ + ": a write was left half done by an earlier error; nothing more is committed to it", __FILE__,
                        __LINE__);
  }
  const SignalDeferral whole_commit;  // a SIGTERM waits for the rename
  ITERTIME_H5_TRY(path_, "flush the working copy", file_.flush(H5F_SCOPE_GLOBAL));
  test_pause();
  const std::string staged = commit_path_of(path_);
  if (!copy_file(work_path_, staged, [this] { test_pause(); }))
    system_failure("cannot copy the working copy to", staged, __FILE__, __LINE__);
  test_pause();
  if (::rename(staged.c_str(), path_.c_str()) != 0)
    system_failure("cannot rename the committed copy onto", path_, __FILE__, __LINE__);
  dirty_ = false;
}

// ---- Store -------------------------------------------------------------------------------------

Store::Transaction::Transaction(Store& store) : shadow_(store.shadow_), uncaught_(std::uncaught_exceptions()) {
  if (shadow_ == nullptr) return;
  deferral_ = std::make_unique<SignalDeferral>();
  shadow_->begin_transaction();
}

Store::Transaction::~Transaction() {
  if (shadow_ == nullptr) return;
  const bool committing = std::uncaught_exceptions() <= uncaught_;
  if (!committing) {
    shadow_->end_transaction(false);
    return;
  }
  try {
    shadow_->end_transaction(true);
  } catch (const std::exception& error) {
    // A destructor cannot throw: a failed commit ends the process as an internal failure would.
    std::fprintf(stderr, "itertime: internal error: %s\n", error.what());
    std::fflush(stderr);
    std::abort();
  }
}

Store::Store(std::shared_ptr<Shadow> shadow, H5::H5File file, std::string path, bool writable)
    : shadow_(std::move(shadow)), file_(std::move(file)), path_(std::move(path)), writable_(writable) {}

void Store::written() {
  if (shadow_ != nullptr) shadow_->written();
}

Store Store::create(const std::string& path, bool force, const std::map<std::string, std::string>& provenance) {
  silence_hdf5();
  std::error_code error;
  const bool existed = std::filesystem::exists(path, error);
  if (existed && !force) {
    throw UserError(path + ": file exists; pass --force to overwrite it (or --resume to continue it)");
  }
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, error)) {
    throw UserError(path + ": folder " + parent.string() + " does not exist; create it first");
  }
  if (existed && std::filesystem::is_directory(path, error)) throw UserError(path + ": is a directory, not an HDF5 file");
  // Locked before W is emptied: a live writer's file is refused, and P stays as it is until the commit.
  const std::string work = work_path_of(path);
  WriterLock lock = WriterLock::acquire(path, work);
  if (!hdf5_locking_off() && writer_holds(path)) throw UserError(being_written(path));  // HDF5's own lock on W
  H5::H5File file;
  try {
    file = H5::H5File(work, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, access_list(true));
  } catch (const H5::Exception& h5_error) {
    if (hdf5_locking_off()) std::filesystem::remove(work, error);  // ours (locked): nothing is left behind
    throw UserError(path + ": cannot create the HDF5 file (" + h5_error.getDetailMsg() + "); check the path and permissions");
  }
  auto shadow = std::make_shared<Shadow>(path, work, std::move(lock), file);
  ITERTIME_H5_TRY(path, "write /meta", {
    H5::Group meta = file.createGroup(kMetaGroup);
    write_int_attribute(meta, kSchemaAttribute, kSchemaVersion);
    for (const auto& [name, value] : provenance) write_string_attribute(meta, name, value);
  });
  shadow->written();  // P appears (or replaces the old one) only now, whole
  return Store(std::move(shadow), std::move(file), path, true);
}

Store Store::open(const std::string& path, bool writable) {
  silence_hdf5();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw UserError(path + ": no such file; pass an HDF5 file written by itertime");
  }
  if (std::filesystem::is_directory(path, error)) throw UserError(path + ": is a directory, not an HDF5 file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    throw UserError(path + ": not an HDF5 file; pass an HDF5 file written by itertime");
  }
  int64_t version = 0;
  {
    H5::H5File probe;
    try {
      probe = H5::H5File(path, H5F_ACC_RDONLY, H5::FileCreatPropList::DEFAULT, access_list(false));
    } catch (const H5::Exception& h5_error) {
      throw UserError(path + ": cannot open the HDF5 file (" + h5_error.getDetailMsg() + ")");
    }
    ITERTIME_H5_READ(path, "cannot read the schema version", version = read_schema_version(probe, path));
  }
  if (version < kOldestReadableSchemaVersion || version > kSchemaVersion) {
    // The older versions still read, as "4 and 5" (or "4", or "4, 5 and 6").
    std::string older;
    for (int64_t v = kOldestReadableSchemaVersion; v < kSchemaVersion; ++v) {
      if (!older.empty()) older += v + 1 == kSchemaVersion ? " and " : ", ";
      older += std::to_string(v);
    }
    const bool several_older = kSchemaVersion - kOldestReadableSchemaVersion > 1;
    throw UserError(path + ": written with itertime schema version " + std::to_string(version) +
                    ", this itertime reads schema version " + std::to_string(kSchemaVersion) +
                    (older.empty() ? "" : (several_older ? " (and versions " : " (and version ") + older + " files)") +
                    "; use the itertime that wrote it, or calibrate again");
  }
  if (!writable) {
    H5::H5File file;
    try {
      file = H5::H5File(path, H5F_ACC_RDONLY, H5::FileCreatPropList::DEFAULT, access_list(false));
    } catch (const H5::Exception& h5_error) {
      throw UserError(path + ": cannot open for reading (" + h5_error.getDetailMsg() + "); check permissions");
    }
    return Store(nullptr, std::move(file), path, false);
  }
  if (::access(path.c_str(), W_OK) != 0) {
    throw UserError(path + ": cannot open for writing (" + std::strerror(errno) + "); check permissions");
  }
  // The working copy is rebuilt from P, under the lock: whatever a killed writer left in it is dropped.
  const std::string work = work_path_of(path);
  WriterLock lock = WriterLock::acquire(path, work);
  if (!hdf5_locking_off() && writer_holds(path)) throw UserError(being_written(path));  // HDF5's own lock on W
  if (!copy_file(path, work, [] {})) {
    const std::string reason = std::strerror(errno);
    std::filesystem::remove(work, error);
    throw UserError(path + ": cannot copy it to " + work + " (" + reason + "); check the folder's permissions and free space");
  }
  H5::H5File file;
  try {
    // Appending keeps a checksummed file's format for what it adds; a store written before that format
    // (HDF5's earliest) does not open with those bounds and is appended to in its own format.
    file = open_work_copy(work);
  } catch (const H5::Exception& h5_error) {
    if (!hdf5_locking_off() && writer_holds(path)) throw UserError(being_written(path));
    std::filesystem::remove(work, error);
    throw UserError(path + ": cannot open for writing (" + h5_error.getDetailMsg() + "); check permissions");
  }
  auto shadow = std::make_shared<Shadow>(path, work, std::move(lock), file);
  return Store(std::move(shadow), std::move(file), path, true);
}

Store Store::create_or_resume(const std::string& path, bool force, bool resume,
                              const std::map<std::string, std::string>& provenance) {
  std::error_code error;
  if (resume && std::filesystem::exists(path, error)) {
    Store store = open(path, true);
    // The file keeps the provenance of the run that created it; each resumed run is noted beside it.
    const auto argv = provenance.find(store::meta_key::kArgv);
    store.set_meta(store::meta_key::kResumedUtc, utc_now_for_meta());
    if (argv != provenance.end()) store.set_meta(store::meta_key::kResumedArgv, argv->second);
    return store;
  }
  return create(path, force, provenance);
}

int64_t Store::schema_version() const {
  int64_t version = 0;
  ITERTIME_H5_READ(path_, "cannot read the schema version", version = read_schema_version(file_, path_));
  return version;
}

std::map<std::string, std::string> Store::meta() const {
  std::map<std::string, std::string> out;
  ITERTIME_H5_READ(path_, "cannot read /meta", {
    H5::Group meta = file_.openGroup(kMetaGroup);
    const int count = meta.getNumAttrs();
    for (int i = 0; i < count; ++i) {
      H5::Attribute attribute = meta.openAttribute(static_cast<unsigned>(i));
      out[attribute.getName()] = render_attribute(attribute);
    }
  });
  return out;
}

void Store::set_meta(const std::string& name, const std::string& value) {
  ITERTIME_CHECK(writable_, "set_meta on a read-only store");
  const SignalDeferral whole_write;
  ITERTIME_H5_TRY(path_, "write /meta", {
    H5::Group meta = file_.openGroup(kMetaGroup);
    write_string_attribute(meta, name, value);
  });
  written();
}

void Store::set_meta(const std::string& name, int64_t value) {
  ITERTIME_CHECK(writable_, "set_meta on a read-only store");
  const SignalDeferral whole_write;
  ITERTIME_H5_TRY(path_, "write /meta", {
    H5::Group meta = file_.openGroup(kMetaGroup);
    write_int_attribute(meta, name, value);
  });
  written();
}

bool Store::exists(const std::string& object_path) const {
  // H5Lexists needs every intermediate link to exist: check each prefix in turn.
  std::string prefix;
  std::size_t start = 1;
  while (start <= object_path.size()) {
    const std::size_t slash = object_path.find('/', start);
    prefix = object_path.substr(0, slash);
    if (H5Lexists(file_.getId(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

void Store::remove(const std::string& object_path) {
  ITERTIME_CHECK(writable_, "remove on a read-only store");
  if (!exists(object_path)) return;
  const SignalDeferral whole_write;
  ITERTIME_H5_TRY(path_, "remove " + object_path, {
    if (H5Ldelete(file_.getId(), object_path.c_str(), H5P_DEFAULT) < 0) throw H5::FileIException("H5Ldelete", "failed");
  });
  written();
}

void Store::ensure_group(const std::string& group_path) {
  ITERTIME_CHECK(writable_, "ensure_group on a read-only store");
  const SignalDeferral whole_write;
  bool created = false;
  std::size_t start = 1;
  while (start <= group_path.size()) {
    const std::size_t slash = group_path.find('/', start);
    const std::string prefix = group_path.substr(0, slash);
    if (H5Lexists(file_.getId(), prefix.c_str(), H5P_DEFAULT) <= 0) {
      ITERTIME_H5_TRY(path_, "create group " + prefix, file_.createGroup(prefix));
      created = true;
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (created) written();
}

void Store::trim(const std::string& object_path, int64_t rows) {
  ITERTIME_CHECK(writable_, "trim on a read-only store");
  ITERTIME_CHECK(rows >= 0, "trim to a negative row count");
  if (!exists(object_path)) return;
  H5::DataSet dataset;
  ITERTIME_H5_TRY(path_, "open " + object_path, dataset = file_.openDataSet(object_path));
  // Truncation reads and writes no rows, so the stored type serves as the memory type.
  TableHandle handle(shadow_, path_, file_, dataset, dataset.getDataType(), 0);
  if (handle.rows() > static_cast<std::size_t>(rows)) handle.truncate(static_cast<std::size_t>(rows));
}

TableHandle Store::open_table(const std::string& table_path, const RowType& row_type, std::size_t chunk_rows) {
  if (exists(table_path)) {
    H5::DataSet dataset;
    std::vector<std::string> stored;
    bool compound = false;
    ITERTIME_H5_READ(path_, "cannot open table " + table_path, {
      dataset = file_.openDataSet(table_path);
      compound = dataset.getTypeClass() == H5T_COMPOUND;
      if (compound) stored = member_names(dataset.getCompType());
    });
    if (!compound) {
      throw UserError(path_ + ": " + table_path + " is not a compound table; the file was not written by this itertime");
    }
    if (stored != row_type.field_names()) {
      throw UserError(path_ + ": table " + table_path + " has fields [" + join(stored) + "] but this itertime expects [" +
                      join(row_type.field_names()) + "]; the file was written by another version");
    }
    return TableHandle(shadow_, path_, file_, dataset, row_type.type(), row_type.row_bytes());
  }
  if (!writable_) {
    throw UserError(path_ + ": has no table " + table_path + "; run the calibration step that writes it first");
  }
  const Transaction together(*this);  // a new table and the groups made for it: one commit, not one each
  const auto slash = table_path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) ensure_group(table_path.substr(0, slash));
  H5::DataSet dataset;
  ITERTIME_H5_TRY(path_, "create table " + table_path, {
    const hsize_t initial[1] = {0};
    const hsize_t maximum[1] = {H5S_UNLIMITED};
    H5::DataSpace space(1, initial, maximum);
    const H5::DSetCreatPropList properties = table_properties(chunk_rows);
    dataset = file_.createDataSet(table_path, row_type.type(), space, properties);
  });
  written();
  return TableHandle(shadow_, path_, file_, dataset, row_type.type(), row_type.row_bytes());
}

TableHandle Store::open_existing_table(const std::string& table_path, const RowType& row_type, std::size_t row_bytes) {
  ITERTIME_CHECK(row_type.row_bytes() == row_bytes, "a row type laid over a struct must have the struct's size");
  if (!exists(table_path)) throw UserError(path_ + ": has no table " + table_path);
  return open_table(table_path, row_type, 0);
}

Table<double> Store::samples(const std::string& table_path, std::size_t chunk_rows) {
  if (exists(table_path)) {
    H5::DataSet dataset;
    bool floats = false;
    ITERTIME_H5_READ(path_, "cannot open array " + table_path, {
      dataset = file_.openDataSet(table_path);
      floats = dataset.getTypeClass() == H5T_FLOAT;
    });
    if (!floats) {
      throw UserError(path_ + ": " + table_path + " is not an array of floats; the file was written by another version");
    }
    return Table<double>(TableHandle(shadow_, path_, file_, dataset, H5::PredType::NATIVE_DOUBLE, sizeof(double)));
  }
  if (!writable_) throw UserError(path_ + ": has no array " + table_path);
  const Transaction together(*this);  // a new array and the groups made for it: one commit
  const auto slash = table_path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) ensure_group(table_path.substr(0, slash));
  H5::DataSet dataset;
  ITERTIME_H5_TRY(path_, "create array " + table_path, {
    const hsize_t initial[1] = {0};
    const hsize_t maximum[1] = {H5S_UNLIMITED};
    H5::DataSpace space(1, initial, maximum);
    const H5::DSetCreatPropList properties = table_properties(chunk_rows);
    dataset = file_.createDataSet(table_path, H5::PredType::IEEE_F64LE, space, properties);
  });
  written();
  return Table<double>(TableHandle(shadow_, path_, file_, dataset, H5::PredType::NATIVE_DOUBLE, sizeof(double)));
}

std::vector<DatasetInfo> Store::list_datasets() const {
  std::vector<DatasetInfo> out;
  ITERTIME_H5_READ(path_, "cannot list datasets", walk(file_.openGroup("/"), "", out));
  return out;
}

void Store::flush() { written(); }

}  // namespace itertime::h5
