// JSON text written straight into a string, without building a document: strings, integers
// and floats (std::to_chars, the shortest text that reads back as the same value) and arrays of
// them. The KServe codec and the OpenAI embeddings answer write their numbers with these.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json.h"

namespace mmserve {

// Appends `s` as a JSON string. Plain ASCII is copied as is; anything else goes through
// nlohmann's escaping, which also replaces invalid UTF-8 with U+FFFD.
inline void AppendString(std::string& out, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out += DumpJson(nlohmann::json(std::string(s)));
}

// Number writers: each writes one value at `p` (room for kMaxNumberChars) and returns its end.
inline constexpr size_t kMaxNumberChars = 32;

template <typename T>
char* WriteInteger(char* p, T v) {
  return std::to_chars(p, p + kMaxNumberChars, v).ptr;
}

// The shortest text that reads back as the same `T`; NaN and infinities, which JSON cannot
// carry, as null; a whole number keeps a ".0" so that it still reads as a float.
template <typename T>
char* WriteFloat(char* p, T v) {
  if (!std::isfinite(v)) return std::copy_n("null", 4, p);
  char* end = std::to_chars(p, p + kMaxNumberChars - 2, v).ptr;
  if (std::find_if(p, end, [](char c) { return c == '.' || c == 'e'; }) == end) {
    *end++ = '.';
    *end++ = '0';
  }
  return end;
}

template <typename T>
void AppendInteger(std::string& out, T v) {
  char buf[kMaxNumberChars];
  out.append(buf, WriteInteger(buf, v));
}

template <typename T>
void AppendFloat(std::string& out, T v) {
  char buf[kMaxNumberChars];
  out.append(buf, WriteFloat(buf, v));
}

// The most characters WriteInteger writes for one T: its digits and a sign.
template <typename T>
inline constexpr size_t kMaxIntegerChars = std::numeric_limits<T>::digits10 + 2;

// Appends "[v0,v1,...]", writing element i (at most kWidth characters) with write(p, i) straight
// into `out`'s buffer.
template <size_t kWidth, typename Write>
void AppendArray(std::string& out, size_t n, Write write) {
  const size_t start = out.size();
  out.resize(start + 2 + n * (kWidth + 1));
  char* p = out.data() + start;
  *p++ = '[';
  for (size_t i = 0; i < n; ++i) {
    if (i) *p++ = ',';
    p = write(p, i);
  }
  *p++ = ']';
  out.resize(static_cast<size_t>(p - out.data()));
}

}  // namespace mmserve
