// A stand-in for the kiln binary in consumer_intree: `compile MODEL -o OUT ...` writes
// "KILNPLAN" and its arguments to OUT. Exit 2 on any other use.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "compile") != 0) return 2;
  const char* out = nullptr;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "-o") == 0) out = argv[i + 1];
  }
  if (out == nullptr) return 2;
  std::FILE* f = std::fopen(out, "w");
  if (f == nullptr) return 2;
  std::fputs("KILNPLAN", f);
  for (int i = 1; i < argc; ++i) std::fprintf(f, " %s", argv[i]);
  std::fputs("\n", f);
  return std::fclose(f) == 0 ? 0 : 2;
}
