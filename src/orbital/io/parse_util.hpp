// Small text helpers shared by the orbital engine's readers (Molden, fchk, cube).
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace molaccel::orbital::io_util {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

inline std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// True when `s` has no control characters other than tab (i.e. is a line of a text file).
inline bool is_text(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

// `s` for an error message: control and non-ASCII bytes as \xNN, at most 40 characters (so a
// binary file is never echoed to the terminal).
inline std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 15]);
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

// Parses a finite floating-point number; accepts Fortran exponents (1.0D+01).
inline bool parse_double(std::string_view text, double& value) {
  text = trim(text);
  if (text.empty() || text.size() > 64) return false;
  char buffer[65];
  std::size_t n = 0;
  for (char c : text) buffer[n++] = (c == 'D' || c == 'd') ? 'E' : c;
  const char* begin = buffer;
  if (*begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, buffer + n, value);
  return ec == std::errc() && ptr == buffer + n && std::isfinite(value);
}

inline bool parse_long(std::string_view text, long& value) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace molaccel::orbital::io_util
