// keywords.cpp: see the header.
#include "python/keywords.hpp"

#include <pybind11/stl.h>

namespace itertime::python {
namespace py = pybind11;
namespace {

std::string type_name(py::handle value) { return py::str(py::type::handle_of(value).attr("__name__")); }

int64_t integer(const std::string& where, py::handle value, int64_t low, int64_t high) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
    throw py::type_error(where + ": expected an int, got " + type_name(value));
  const py::int_ number = py::reinterpret_borrow<py::int_>(value);
  const bool below = number<py::int_(low), above = number> py::int_(high);
  if (below || above) {
    throw py::value_error(where + "=" + std::string(py::str(value)) + ": out of range (" + std::to_string(low) + " to " +
                          std::to_string(high) + ")");
  }
  return number.cast<int64_t>();
}

std::string text(const std::string& where, py::handle value) {
  if (!py::isinstance<py::str>(value)) {
    if (py::isinstance(value, py::module_::import("os").attr("PathLike")))
      return py::str(py::module_::import("os").attr("fspath")(value));
    throw py::type_error(where + ": expected a str, got " + type_name(value));
  }
  return value.cast<std::string>();
}

// One item, or a list or tuple of them.
std::vector<py::handle> items(py::handle value) {
  std::vector<py::handle> out;
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (py::handle item : value) out.push_back(item);
  } else {
    out.push_back(value);
  }
  return out;
}

}  // namespace

Value check_value(const std::string& function, const std::string& keyword, Kind kind, int64_t low, int64_t high,
                  py::handle value) {
  const std::string where = function + "(): " + keyword;
  Value out;
  switch (kind) {
    case Kind::kInt:
    case Kind::kInt64: out.integer = integer(where, value, low, high); break;
    case Kind::kFloat:
      if (py::isinstance<py::bool_>(value) || !(py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)))
        throw py::type_error(where + ": expected a number, got " + type_name(value));
      out.number = value.cast<double>();
      if (!(out.number >= static_cast<double>(low) && out.number <= static_cast<double>(high)))
        throw py::value_error(where + "=" + std::string(py::str(value)) + ": out of range (" + std::to_string(low) + " to " +
                              std::to_string(high) + ")");
      break;
    case Kind::kText: out.text = text(where, value); break;
    case Kind::kFlag:
      if (!py::isinstance<py::bool_>(value)) throw py::type_error(where + ": expected True or False, got " + type_name(value));
      out.flag = value.cast<bool>();
      break;
    case Kind::kIntList:
      for (py::handle item : items(value)) out.integers.push_back(static_cast<int>(integer(where, item, low, high)));
      if (out.integers.empty()) throw py::value_error(where + ": give at least one value");
      break;
    case Kind::kTextList:
      for (py::handle item : items(value)) out.texts.push_back(text(where, item));
      if (out.texts.empty()) throw py::value_error(where + ": give at least one value");
      break;
  }
  return out;
}

}  // namespace itertime::python
