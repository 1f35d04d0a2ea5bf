// h5_parent_rows.hpp: the store's resumable "parent row with child rows" pattern, written once. A parent
// row (a comm point, a ground-truth configuration, a stage trace) owns a contiguous span of rows in each
// of its child tables or sample arrays, and records each span as (offset, count) members of its own.
// Invariants:
//  - append_with_children() appends every child span first, then the parent row with the offsets filled
//    in, all in one Store::Transaction: they reach the file in one commit, so a killed job leaves either
//    all of them or none (h5store.hpp), and a parent row never points past its children.
//  - complete_parent_keys() returns the keys of the parent rows present and, on a writable store, trims
//    every child table to the end of the last span a parent points at (to nothing when the parent table
//    is missing), so that the next append's offsets are right. Files written before transactions (by a
//    job killed between a child span and its parent row) can hold such child rows; this drops them. A
//    parent is present exactly when its row is.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "common/h5store.hpp"

namespace itertime::h5 {

// Where one child table lives, and which members of the parent row record its span.
template <typename Parent>
struct ChildTable {
  const char* path;
  int64_t Parent::*offset;
  int64_t Parent::*count;
};

// One parent's rows for one child table (doubles: a raw samples array; other types: a compound table).
template <typename Parent, typename Child>
struct ChildRows {
  ChildTable<Parent> table;
  const std::vector<Child>& rows;
};

template <typename Parent, typename Child>
ChildRows<Parent, Child> child_rows(const ChildTable<Parent>& table, const std::vector<Child>& rows) {
  return ChildRows<Parent, Child>{table, rows};
}

namespace detail {
template <typename Child>
Table<Child> open_child_table(Store& store, const char* path) {
  if constexpr (std::is_same_v<Child, double>) {
    return store.samples(path);
  } else {
    return store.table<Child>(path);
  }
}

template <typename Parent, typename Child>
void append_child_span(Store& store, Parent& parent, const ChildRows<Parent, Child>& children) {
  auto table = open_child_table<Child>(store, children.table.path);
  parent.*(children.table.offset) = static_cast<int64_t>(table.size());
  parent.*(children.table.count) = static_cast<int64_t>(children.rows.size());
  table.append(children.rows);
}
}  // namespace detail

// Appends each child span (in the order given), then `parent` at `parent_path` with its offset and count
// members set to where the spans went.
template <typename Parent, typename... Child>
void append_with_children(Store& store, const char* parent_path, Parent parent, const ChildRows<Parent, Child>&... children) {
  const Store::Transaction together(store);
  (detail::append_child_span(store, parent, children), ...);
  store.table<Parent>(parent_path).append(parent);
}

// The keys (`key_of(row)`) of the parent rows at `parent_path`; on a writable store, each child table is
// trimmed to the end of the last span the parents point at, or emptied when the parent table does not
// exist (one commit).
template <typename Parent, typename KeyOf, typename... Tables>
std::set<std::string> complete_parent_keys(Store& store, const char* parent_path, KeyOf&& key_of, const Tables&... child_tables) {
  static_assert((std::is_same_v<Tables, ChildTable<Parent>> && ...), "child tables must describe the parent's spans");
  std::set<std::string> keys;
  if (!store.exists(parent_path)) {
    if (store.writable()) {
      const Store::Transaction trims(store);
      (store.trim(child_tables.path, 0), ...);
    }
    return keys;
  }
  const std::vector<Parent> rows = store.table<Parent>(parent_path).read_all();
  for (const Parent& row : rows) keys.insert(key_of(row));
  auto span_end = [&rows](const ChildTable<Parent>& table) {
    int64_t end = 0;
    for (const Parent& row : rows) end = std::max(end, row.*(table.offset) + row.*(table.count));
    return end;
  };
  if (store.writable()) {
    const Store::Transaction trims(store);
    (store.trim(child_tables.path, span_end(child_tables)), ...);
  }
  return keys;
}

}  // namespace itertime::h5
