// keywords.hpp: the Python front's syntax: each function's keywords as a table (keyword, the command's
// option it stands for, its kind, its bounds, its help), the check of a value given for one, and the
// renaming of the command's option names in a message into the keywords.
// Invariants:
//  - A keyword is the command's option name with '-' as '_' (`tp_comm_overlap` for --tp-comm-overlap), but
//    `from_` for --from (a Python keyword) and the positional names in lower case (source, calibration).
//  - A value of the wrong type is a TypeError, one out of bounds a ValueError, each one line naming the
//    function and the keyword; None is "not given" (the command's default) for every keyword.
//  - A given keyword sets its field and is recorded under its command-line name in the request's `given`
//    set, exactly as the command line records a flag it saw.
#pragma once

#include <climits>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

namespace itertime::python {

enum class Kind { kInt, kInt64, kFloat, kText, kFlag, kIntList, kTextList };

// A checked value of one kind.
struct Value {
  int64_t integer = 0;
  double number = 0;
  std::string text;
  bool flag = false;
  std::vector<int> integers;
  std::vector<std::string> texts;
};

template <class Request>
struct Keyword {
  const char* keyword;  // the Python name
  const char* flag;     // the command's option ("--dp"; "" for a positional argument)
  Kind kind;
  const char* help;
  void (*set)(Request& request, const Value& value);
  int64_t low = INT_MIN, high = INT_MAX;  // kInt, kInt64, kIntList: the bounds of each integer
};

// `value` checked as `kind` for `function`'s `keyword` (TypeError / ValueError, one line).
Value check_value(const std::string& function, const std::string& keyword, Kind kind, int64_t low, int64_t high,
                  pybind11::handle value);

// Every keyword of `kwargs` set on `request` (None: skipped; an unknown keyword: TypeError).
template <class Request>
void apply_keywords(const std::string& function, const std::vector<Keyword<Request>>& table, const pybind11::dict& kwargs,
                    Request& request) {
  for (const auto& item : kwargs) {
    const std::string name = pybind11::str(item.first);
    const Keyword<Request>* row = nullptr;
    for (const Keyword<Request>& k : table) {
      if (name == k.keyword) row = &k;
    }
    if (row == nullptr) throw pybind11::type_error(function + "() got an unexpected keyword argument '" + name + "'");
    if (item.second.is_none()) continue;
    row->set(request, check_value(function, name, row->kind, row->low, row->high, item.second));
    if (row->flag[0] != '\0') request.given.insert(row->flag);
  }
}

// `message` with each of the table's command-line options ("--tp-comm-overlap") as its keyword.
template <class Request>
std::string in_keywords(std::string message, const std::vector<Keyword<Request>>& table) {
  for (const Keyword<Request>& k : table) {
    const std::string flag = k.flag;
    if (flag.empty()) continue;
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at)) {
      const size_t end = at + flag.size();
      const bool whole =
          end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-');
      if (whole) {
        message.replace(at, flag.size(), k.keyword);
        at += std::string(k.keyword).size();
      } else {
        at = end;
      }
    }
  }
  return message;
}

// The table as Python values for the package's signatures and docstrings: [(keyword, kind name, help)].
template <class Request>
pybind11::list describe(const std::vector<Keyword<Request>>& table) {
  static const char* const kinds[] = {"int", "int", "float", "str", "bool", "list[int]", "list[str]"};
  pybind11::list out;
  for (const Keyword<Request>& k : table) out.append(pybind11::make_tuple(k.keyword, kinds[static_cast<int>(k.kind)], k.help));
  return out;
}

}  // namespace itertime::python
