// mutator.hpp: the deterministic mutation engine of the fuzz tests (tests/fuzz).
// Invariants:
//  - Pure and deterministic: input i of a target is a function of (base seed, target name, i) only, so
//    any input a test reports is reproduced by ITERTIME_FUZZ_FIRST=i ITERTIME_FUZZ_INPUTS=1 (same seed).
//  - Byte mutations (flips, interesting bytes and tokens, deletions, duplications, truncation, splicing
//    two seeds) work on any text; JSON mutations (a value replaced by one of another type, huge, negative
//    or NaN-like numbers, deep nesting, duplicate and unknown keys, unicode, very long strings) work on
//    the seed's parsed tree or its text, and fall back to byte mutations when the seed is not JSON.
//  - Inputs stay below a few megabytes (strings up to 100,000 bytes, nesting up to 100,000 levels, rarely:
//    deep enough to overflow the stack of any parser or error message that recursed into such a value,
//    the bug class fixed in 96fbbe4; fuzz_parsers.cpp KnownBugProbes and tests/unit/test_parser_fixes.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <cstdio>
#include <string>
#include <vector>

namespace itertime::fuzz {

// SplitMix64: small, fast, and good enough to drive mutations.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

 private:
  uint64_t state_;
};

inline uint64_t hash_text(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The generator of input `index` of target `target`.
inline Rng input_rng(uint64_t base_seed, const std::string& target, uint64_t index) {
  Rng mix(base_seed ^ hash_text(target));
  return Rng(mix.next() + index * 0xD1B54A32D192ED03ull);
}

// Texts that parsers treat specially: JSON punctuation, numbers at type limits, NaN-like words.
inline const std::vector<std::string>& interesting_tokens() {
  static const std::vector<std::string> kTokens = {"{",
                                                   "}",
                                                   "[",
                                                   "]",
                                                   ",",
                                                   ":",
                                                   "\"",
                                                   "\\",
                                                   "\\u0000",
                                                   "\\ud800",
                                                   "null",
                                                   "true",
                                                   "false",
                                                   "0",
                                                   "-0",
                                                   "-1",
                                                   "1e308",
                                                   "-1e308",
                                                   "1e-308",
                                                   "1e999",
                                                   "NaN",
                                                   "nan",
                                                   "Infinity",
                                                   "-Infinity",
                                                   "2147483647",
                                                   "2147483648",
                                                   "-2147483649",
                                                   "4294967296",
                                                   "9223372036854775807",
                                                   "9223372036854775808",
                                                   "-9223372036854775809",
                                                   "18446744073709551615",
                                                   "18446744073709551616",
                                                   "0x10",
                                                   "1.5",
                                                   "07",
                                                   "+1",
                                                   ".5",
                                                   "1e",
                                                   "\xc3\xa9",
                                                   "\xe2\x80\xae",
                                                   "\xff",
                                                   "\xc0\x80",
                                                   "\xed\xa0\x80",
                                                   "\xf4\x90\x80\x80",
                                                   "\n",
                                                   "\r\n",
                                                   "\t",
                                                   " ",
                                                   "K",
                                                   "M",
                                                   "G",
                                                   "B",
                                                   "+",
                                                   "-",
                                                   "/",
                                                   "..",
                                                   "%s",
                                                   "%n"};
  return kTokens;
}

inline std::string random_bytes(Rng& rng, std::size_t n) {
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng.below(256));
  return out;
}

// One byte-level mutation of `text` (`other`: a second seed for splicing).
inline void mutate_bytes(Rng& rng, std::string& text, const std::string& other) {
  const std::size_t size = text.size();
  switch (rng.below(10)) {
    case 0:  // flip one bit
      if (size) text[rng.below(size)] ^= static_cast<char>(1u << rng.below(8));
      break;
    case 1:  // a random byte
      if (size) text[rng.below(size)] = static_cast<char>(rng.below(256));
      break;
    case 2: {  // insert an interesting byte
      static const char kBytes[] = {'\0', '\xff', '\x7f', '\x80', '\n', '"', '{', '}', '[', ']', ',', ':', '\\', '-', '0', '9'};
      text.insert(rng.below(size + 1), 1, kBytes[rng.below(sizeof(kBytes))]);
      break;
    }
    case 3:  // insert a token
      text.insert(rng.below(size + 1), rng.pick(interesting_tokens()));
      break;
    case 4:  // delete a range
      if (size) {
        const std::size_t at = rng.below(size);
        text.erase(at, 1 + rng.below(std::min<std::size_t>(size - at, 64)));
      }
      break;
    case 5:  // duplicate a range
      if (size) {
        const std::size_t at = rng.below(size);
        const std::string piece = text.substr(at, 1 + rng.below(std::min<std::size_t>(size - at, 64)));
        text.insert(rng.below(size + 1), piece);
      }
      break;
    case 6:  // truncate
      text.resize(rng.below(size + 1));
      break;
    case 7: {  // splice: a prefix of this seed, a suffix of the other
      const std::size_t cut = rng.below(size + 1);
      const std::size_t from = other.empty() ? 0 : rng.below(other.size());
      text = text.substr(0, cut) + other.substr(from);
      break;
    }
    case 8:  // overwrite a range with random bytes
      if (size) {
        const std::size_t at = rng.below(size);
        const std::size_t n = 1 + rng.below(std::min<std::size_t>(size - at, 16));
        text.replace(at, n, random_bytes(rng, n));
      }
      break;
    default:  // replace a digit run by a limit number
      for (std::size_t tries = 0; tries < 8 && size; ++tries) {
        std::size_t at = rng.below(size);
        if (text[at] < '0' || text[at] > '9') continue;
        std::size_t end = at;
        while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
        static const std::vector<std::string> kNumbers = {
            "0", "-1", "2147483648", "9223372036854775807", "18446744073709551616", "1e308", "-0", "99999999999999999999999"};
        text.replace(at, end - at, rng.pick(kNumbers));
        break;
      }
      break;
  }
}

// A JSON value of a random kind, built for hostility: wrong types, limits, unicode, long text.
inline nlohmann::json hostile_value(Rng& rng) {
  using nlohmann::json;
  switch (rng.below(16)) {
    case 0: return nullptr;
    case 1: return rng.chance(50);
    case 2: return -1;
    case 3: return 0;
    case 4: return std::numeric_limits<int64_t>::max();
    case 5: return std::numeric_limits<int64_t>::min();
    case 6: return std::numeric_limits<uint64_t>::max();
    case 7: return 2147483648ll;
    case 8: return 1e308;
    case 9: return -0.5;
    case 10: return json::array({1, 2});
    case 11: return json::object({{"a", 1}});
    case 12: return std::string(rng.chance(50) ? 100000 : 300, rng.chance(50) ? 'x' : '9');
    case 13: return std::string("\xc3\xa9\xe2\x80\xae\xf0\x9f\x98\x80 \x01\n\"", 14);
    case 14: {
      static const std::vector<std::string> kWords = {"",    "fp32", "amp-bf16", "cuda", "cpu",   "full",  "selective", "4M",
                                                      "64K", "1G",   "gpu",      "TB/s", "count", "llama", "../x.json", "/"};
      return rng.pick(kWords);
    }
    default: return static_cast<int64_t>(rng.below(9)) - 1;
  }
}

// Every value of `root` (objects and arrays included) as JSON pointers, root excluded.
inline void collect_pointers(const nlohmann::json& value, const nlohmann::json::json_pointer& here,
                             std::vector<nlohmann::json::json_pointer>& out) {
  if (value.is_object()) {
    for (const auto& item : value.items()) {
      out.push_back(here / item.key());
      collect_pointers(item.value(), here / item.key(), out);
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      out.push_back(here / i);
      collect_pointers(value[i], here / i, out);
    }
  }
}

// One JSON-aware mutation; false when `text` is not JSON (the caller then mutates bytes).
inline bool mutate_json(Rng& rng, std::string& text) {
  using nlohmann::json;
  // The tree walk and dump() recurse: a deeply nested text (from an earlier round) is mutated as bytes.
  int depth = 0, deepest = 0;
  for (const char c : text) {
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if (c == ']' || c == '}') --depth;
  }
  if (deepest > 256) return false;
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return false;
  std::vector<json::json_pointer> pointers;
  collect_pointers(root, json::json_pointer(), pointers);
  const unsigned kind = static_cast<unsigned>(rng.below(8));
  if (kind <= 3 && !pointers.empty()) {
    const json::json_pointer target = rng.pick(pointers);
    json& value = root[target];
    if (kind == 0 || kind == 1) {
      value = hostile_value(rng);  // another type, a limit, unicode, a long string
    } else if (kind == 2 && value.is_number()) {
      static const std::vector<double> kFactors = {-1, 0, 1e6, 1e18, 1e300, 0.5, 1.0000001};
      value = value.get<double>() * rng.pick(kFactors);
    } else {
      // remove the member or element
      const json::json_pointer parent = target.parent_pointer();
      json& container = root[parent];
      if (container.is_object())
        container.erase(target.back());
      else if (container.is_array() && !container.empty())
        container.erase(container.size() - 1);
    }
    text = root.dump(-1, ' ', false, json::error_handler_t::replace);
    return true;
  }
  if (kind == 4) {  // an unknown or duplicate key at the top or in a nested object
    const std::size_t brace = text.find('{', rng.below(text.size() + 1));
    const std::size_t at = brace == std::string::npos ? text.find('{') : brace;
    if (at == std::string::npos) return false;
    std::string key = "unknown";
    if (root.is_object() && !root.empty()) {
      auto it = root.begin();
      std::advance(it, static_cast<long>(rng.below(root.size())));
      key = it.key();  // a duplicate key
    }
    text.insert(at + 1, "\"" + key + "\": " + hostile_value(rng).dump(-1, ' ', false, json::error_handler_t::replace) + ",");
    return true;
  }
  if (kind == 5) {  // deep nesting replacing a scalar's text
    // 100,000 levels (past any recursion's stack) in 2% of these mutations only: parsing such a text costs
    // about 1,000 ordinary inputs' time (each fixed class is pinned by KnownBugProbes anyway).
    static const std::vector<std::size_t> kDepths = {8, 64, 256, 1000};
    const std::size_t levels = rng.chance(2) ? 100000 : rng.pick(kDepths);
    const char open = rng.chance(50) ? '[' : '{';
    std::string nested;
    if (open == '[') {
      nested = std::string(levels, '[') + "1" + std::string(levels, ']');
    } else {
      nested.reserve(levels * 7);
      for (std::size_t i = 0; i < levels; ++i) nested += "{\"a\":";
      nested += "1" + std::string(levels, '}');
    }
    const std::size_t colon = text.find(':', rng.below(text.size() + 1));
    if (colon == std::string::npos) return false;
    std::size_t end = colon + 1;
    while (end < text.size() && text[end] != ',' && text[end] != '}' && text[end] != ']') ++end;
    text.replace(colon + 1, end - colon - 1, nested);
    return true;
  }
  if (kind == 6) {  // a raw NaN-like or out-of-range number in place of a number's text
    const std::size_t colon = text.find(':', rng.below(text.size() + 1));
    if (colon == std::string::npos) return false;
    static const std::vector<std::string> kRaw = {
        "NaN",  "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "123456789012345678901234567890",
        "-0.0", "00",       "1.",        "0x1p3"};
    std::size_t end = colon + 1;
    while (end < text.size() && text[end] != ',' && text[end] != '}') ++end;
    text.replace(colon + 1, end - colon - 1, rng.pick(kRaw));
    return true;
  }
  // kind 7: string escapes, including lone surrogates and NUL, inside an existing string
  const std::size_t quote = text.find('"', rng.below(text.size() + 1));
  if (quote == std::string::npos) return false;
  static const std::vector<std::string> kEscapes = {"\\u0000", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u00e9",
                                                    "\\n",     "\\\"",    "\\/",     "\\x41",          "\\"};
  text.insert(quote + 1, rng.pick(kEscapes));
  return true;
}

// A mutated version of a random seed: 1 to 8 mutations, about half of them JSON-aware when the text
// is JSON.
inline std::string mutate(Rng& rng, const std::vector<std::string>& seeds, bool json_aware) {
  std::string text = rng.pick(seeds);
  const std::string& other = rng.pick(seeds);
  const std::size_t rounds = 1 + rng.below(rng.chance(70) ? 2 : 8);
  for (std::size_t i = 0; i < rounds; ++i) {
    if (json_aware && rng.chance(50) && mutate_json(rng, text)) continue;
    mutate_bytes(rng, text, other);
  }
  return text;
}

// `text` printable on one line: C escapes for everything outside printable ASCII; long texts cut.
inline std::string escaped(const std::string& text, std::size_t limit = 4000) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    }
  }
  if (text.size() > limit) out += "...(" + std::to_string(text.size()) + " bytes in all)";
  return out;
}

}  // namespace itertime::fuzz
