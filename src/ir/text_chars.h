// Character classes and string quoting shared by the IR text printer (text_print.cc) and
// parser (text_parse.cc); private to src/ir.
#pragma once

#include <string>
#include <string_view>

namespace kiln::text_internal {

inline bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsHexDigit(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
inline int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// `s` as a double-quoted string with escapes (\n \t \r \" \\ \xHH); other bytes as is.
void AppendQuoted(std::string* out, std::string_view s);

}  // namespace kiln::text_internal
