// The lazily loaded cuBLASLt table (cublaslt_api.h).
#include "kernels/cuda/cublaslt_api.h"

#include <dlfcn.h>

#include <type_traits>

namespace kiln::cuda {
namespace {

#define KILN_STR2_(x) #x
#define KILN_STR_(x) KILN_STR2_(x)

struct Loaded {
  LtApi api{};
  bool ok = false;
  std::string why;
};

Loaded Load() {
  Loaded l;
  // The soname the toolkit's headers describe (ABI-compatible within a major) through the
  // library search, then in the toolkit kiln was built with (where a linked library would
  // have been found through its RPATH), then the unversioned name.
  const char* const names[] = {"libcublasLt.so." KILN_STR_(CUBLAS_VER_MAJOR),
                               KILN_CUDA_LIBRARY_DIR "/libcublasLt.so." KILN_STR_(CUBLAS_VER_MAJOR),
                               "libcublasLt.so"};
  void* h = nullptr;
  for (const char* n : names) {
    h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) break;
    if (l.why.empty()) l.why = std::string("cannot load ") + n + ": " + dlerror();
  }
  if (h == nullptr) return l;
  bool all = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (fn == nullptr && all) {
      all = false;
      l.why = std::string("libcublasLt lacks ") + name;
    }
  };
  LtApi& a = l.api;
  sym(a.Create, "cublasLtCreate");
  sym(a.Destroy, "cublasLtDestroy");
  sym(a.GetVersion, "cublasLtGetVersion");
  sym(a.Matmul, "cublasLtMatmul");
  sym(a.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(a.MatmulDescCreate, "cublasLtMatmulDescCreate");
  sym(a.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  sym(a.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  sym(a.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  sym(a.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  sym(a.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  sym(a.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  sym(a.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  sym(a.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
  if (!all) return l;  // the handle stays open: harmless, and dlclose could unmap in use
  l.ok = true;
  l.why.clear();
  return l;
}

}  // namespace

const LtApi* Lt(std::string* why) {
  static const Loaded* const loaded = new Loaded(Load());  // never freed: used at exit
  if (!loaded->ok && why != nullptr) *why = loaded->why;
  return loaded->ok ? &loaded->api : nullptr;
}

}  // namespace kiln::cuda
