// log_timings.cpp: see the header.
#include "formats/log_timings.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace itertime::formats {

LogText log_from_text(std::string source, std::string bytes) {
  LogText log;
  log.source = std::move(source);
  log.bytes = std::move(bytes);
  std::size_t start = 0;
  const std::string& b = log.bytes;
  while (start < b.size()) {
    const std::size_t end = b.find('\n', start);
    const std::size_t stop = end == std::string::npos ? b.size() : end;
    std::string line = b.substr(start, stop - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    log.lines.push_back(std::move(line));
    if (end == std::string::npos) {
      log.cut = true;
      break;
    }
    start = end + 1;
  }
  return log;
}

LogText read_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot read the log");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UserError(path + ": cannot read the log");
  return log_from_text(path, text.str());
}

UserError log_error(const std::string& file, std::size_t line, const std::string& what) {
  return UserError(file + ":" + std::to_string(line) + ": " + what);
}

void require_growing(const std::string& file, std::size_t line, const std::string& word, int64_t counter, int64_t previous) {
  if (counter > previous) return;
  throw log_error(file, line,
                  word + " " + std::to_string(counter) + " after " + word + " " + std::to_string(previous) +
                      ": two runs interleaved, or a restart in one log");
}

std::string strip_ansi(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= '@' && line[i] <= '~')) ++i;  // parameters, then the final byte
      continue;
    }
    out.push_back(line[i]);
  }
  return out;
}

namespace {
std::string_view token(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size() && text[begin] == ' ') ++begin;
  std::size_t end = begin;
  while (end < text.size() && text[end] != ' ' && text[end] != '|' && text[end] != '\t') ++end;
  return text.substr(begin, end - begin);
}
}  // namespace

bool parse_number(std::string_view text, double& value, bool commas) {
  std::string t(token(text));
  if (commas) t.erase(std::remove(t.begin(), t.end(), ','), t.end());
  if (t.empty() || t.size() > 64) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v)) return false;
  value = v;
  return true;
}

bool parse_integer(std::string_view text, int64_t& value) {
  const std::string t(token(text));
  if (t.empty() || t.size() > 18) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size() || errno == ERANGE) return false;
  value = v;
  return true;
}

std::string_view after(std::string_view line, std::string_view label) {
  const std::size_t at = line.find(label);
  if (at == std::string_view::npos) return {};
  return line.substr(at + label.size());
}

std::string field_text(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(' ');
  if (begin == std::string_view::npos) return "";
  text.remove_prefix(begin);
  text = text.substr(0, std::min(text.find('|'), text.find("  ")));
  const std::size_t end = text.find_last_not_of(' ');
  return end == std::string_view::npos ? "" : std::string(text.substr(0, end + 1));
}

namespace {
double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}
}  // namespace

LogMeasurement settle(const std::string& file, const std::vector<LogInterval>& intervals) {
  LogMeasurement m;
  m.intervals_total = intervals.size();
  std::size_t first = intervals.empty() ? 0 : 1;  // the first interval holds the first iteration
  while (first + kMinSteadyIntervals < intervals.size()) {
    std::vector<double> later;
    for (std::size_t i = first + 1; i < intervals.size(); ++i) later.push_back(intervals[i].time_us);
    const double reference = median_of(later);
    if (std::abs(intervals[first].time_us - reference) <= kSettleFraction * reference) break;
    ++first;
  }
  if (intervals.size() < first + kMinSteadyIntervals) {
    throw UserError(file + ": " + std::to_string(intervals.size()) + " timing line(s), " +
                    std::to_string(intervals.size() - first) + " after the warm-up; at least " +
                    std::to_string(kMinSteadyIntervals) + " are needed (log more intervals, or a longer run)");
  }
  m.intervals_warmup = first;
  double weighted = 0;
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    if (i < first) {
      m.warmup_iters += intervals[i].iterations;
      continue;
    }
    m.timed_iters += intervals[i].iterations;
    weighted += intervals[i].time_us * static_cast<double>(intervals[i].iterations);
    m.steady_us.push_back(intervals[i].time_us);
  }
  std::vector<double> sorted = m.steady_us;
  std::sort(sorted.begin(), sorted.end());
  m.time_us_median = median_of(sorted);
  m.time_us_mean = weighted / static_cast<double>(std::max<int64_t>(m.timed_iters, 1));
  m.time_us_min = sorted.front();
  m.time_us_max = sorted.back();
  m.time_us_p90 = sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(std::ceil(0.9 * sorted.size())) - 1)];
  double mean = 0, spread = 0;
  for (const double t : sorted) mean += t;
  mean /= static_cast<double>(sorted.size());
  double var = 0;
  for (const double t : sorted) {
    var += (t - mean) * (t - mean);
    spread += std::abs(t - m.time_us_median);
  }
  m.time_cv = mean > 0 ? std::sqrt(var / static_cast<double>(sorted.size())) / mean : 0;
  m.spread_pct = m.time_us_median > 0 ? 100.0 * spread / static_cast<double>(sorted.size()) / m.time_us_median : 0;
  return m;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw InternalError("SHA-256 of a log failed (OpenSSL EVP_Digest)", __FILE__, __LINE__);
  }
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

}  // namespace itertime::formats
