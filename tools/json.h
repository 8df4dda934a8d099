// A minimal streaming JSON writer for the CLI's machine-readable output.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::cli {

class JsonWriter {
 public:
  JsonWriter& BeginObject() {
    Sep();
    out_ += '{';
    first_.push_back(true);
    return *this;
  }
  JsonWriter& EndObject() {
    out_ += '}';
    first_.pop_back();
    return *this;
  }
  JsonWriter& BeginArray() {
    Sep();
    out_ += '[';
    first_.push_back(true);
    return *this;
  }
  JsonWriter& EndArray() {
    out_ += ']';
    first_.pop_back();
    return *this;
  }
  JsonWriter& Key(const std::string& k) {
    Sep();
    Quote(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& String(const std::string& s) {
    Sep();
    Quote(s);
    return *this;
  }
  JsonWriter& Int(int64_t v) {
    Sep();
    absl::StrAppend(&out_, v);
    return *this;
  }
  JsonWriter& Null() {
    Sep();
    out_ += "null";
    return *this;
  }
  JsonWriter& Bool(bool v) {
    Sep();
    out_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter& Double(double v) {
    Sep();
    if (std::isfinite(v))
      absl::StrAppend(&out_, absl::StrFormat("%.9g", v));
    else
      out_ += "null";
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  void Sep() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  void Quote(const std::string& s) {
    out_ += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '\r':
          out_ += "\\r";
          break;
        default:
          if (c < 0x20)
            absl::StrAppend(&out_, absl::StrFormat("\\u%04x", c));
          else
            out_ += static_cast<char>(c);
      }
    }
    out_ += '"';
  }
  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

inline std::string HumanBytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(b, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace kiln::cli
