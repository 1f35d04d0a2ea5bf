// json_fields.hpp: what the readers of JSON files share: the parse of the text (jobs, model configs and
// the data/ files), and for the data/ files (hardware descriptions, kernel figures, published figures)
// the form of their errors and the refusal of fields they do not know.
// Invariants: text that is not JSON, or holds a number JSON cannot (1e999), is a UserError
// "<source>: not valid JSON (<parser's words>)<hint>"; every mistake in a data/ file is one UserError "<source>: [<row>: ]field
// '<field>': <problem>" (the row only once at_row has named one); a key not known is refused, never ignored: the first in
// nlohmann's key order, named "where.key" ("key" where `where` is empty), with the known keys listed sorted. Header-only.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "common/errors.hpp"
#include "common/input_file.hpp"

namespace itertime {

inline nlohmann::json parse_json_text(const std::string& text, const std::string& source, const std::string& hint = "") {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, and out_of_range for numbers like 1e999
    throw UserError(source + ": not valid JSON (" + error.what() + ")" + hint);
  }
}

// The JSON object a data/ file holds: the file read as read_input_file reads it (its refusals in
// `words`), parsed as above; UserError "<path>: must hold one JSON object" when it holds another value.
inline nlohmann::json read_json_object_file(const std::string& path, const InputFileWords& words) {
  nlohmann::json doc = parse_json_text(read_input_file(path, words), path);
  if (!doc.is_object()) throw UserError(path + ": must hold one JSON object");
  return doc;
}

class JsonFieldReader {
 public:
  explicit JsonFieldReader(std::string source) : source_(std::move(source)) {}

  // The row the errors that follow name ("" for none).
  void at_row(const std::string& row) { row_ = row; }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw UserError(source_ + ": " + (row_.empty() ? "" : row_ + ": ") + "field '" + field + "': " + problem);
  }

  // Refuses keys of `object` that are not in `known`; `where` is the object's path ("" at the top).
  void only_known(const nlohmann::json& object, const std::string& where, const std::set<std::string>& known) const {
    for (const auto& item : object.items()) {
      if (known.count(item.key()) != 0) continue;
      std::string list;
      for (const auto& key : known) list += (list.empty() ? "" : ", ") + key;
      fail(where.empty() ? item.key() : where + "." + item.key(), "unknown field (known here: " + list + ")");
    }
  }

 private:
  std::string source_;
  std::string row_;
};

}  // namespace itertime
