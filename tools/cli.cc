// tools/cli.h: exit codes, error printing and the argument cursor the subcommands share.
#include "tools/cli.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace kiln::cli {

int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnimplemented:
      return kExitUnsupported;
    case absl::StatusCode::kAborted:
      return kExitAccuracy;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
      return kExitInvalid;
    default:
      return kExitInternal;
  }
}

int Fail(const absl::Status& s) {
  std::string msg(s.message());
  for (char& c : msg)
    if (c == '\n') c = ' ';
  const char* kind = s.code() == absl::StatusCode::kUnimplemented ? "unsupported" : "error";
  std::fprintf(stderr, "kiln: %s: %s\n", kind, msg.c_str());
  return ExitCodeFor(s);
}

Args::Args(int argc, char** argv, int first) : i_(0) {
  for (int i = first; i < argc; ++i) args_.emplace_back(argv[i]);
}

bool Args::Flag(const std::string& name) {
  if (Done() || args_[i_] != name) return false;
  ++i_;
  return true;
}

bool Args::Option(const std::string& name, std::string* out) {
  if (Done()) return false;
  const std::string& a = args_[i_];
  if (a == name) {
    if (i_ + 1 >= args_.size()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      ++i_;
      return false;
    }
    *out = args_[i_ + 1];
    i_ += 2;
    return true;
  }
  if (a.rfind(name + "=", 0) == 0) {
    *out = a.substr(name.size() + 1);
    ++i_;
    return true;
  }
  return false;
}

bool Args::Positional(std::string* out) {
  if (Done() || (args_[i_].size() > 1 && args_[i_][0] == '-')) return false;
  *out = args_[i_++];
  return true;
}

std::string Args::Next() { return Done() ? "" : args_[i_++]; }

}  // namespace kiln::cli
