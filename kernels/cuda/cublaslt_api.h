// cuBLASLt, loaded on first use (dlopen) instead of linked. Linked, its start-up work runs
// in every process that links kiln — CPU-only users and `kiln --help` included: measured
// here, `kiln --help` went from 0.00 s and 10 MB resident to 0.08-0.37 s and 221 MB, and a
// CPU `kiln run` from 599M to 671M instructions (callgrind). Loaded lazily, that cost is
// paid by the first cuda executor or CUDA query, where cuBLASLt is needed anyway.
// What: the table of the cuBLASLt entry points kiln calls, resolved from
// libcublasLt.so.<the toolkit's cuBLAS major> through the normal library search
// (LD_LIBRARY_PATH, the loader's --library-path, ld.so.cache), then in the build's toolkit
// directory, then as libcublasLt.so.
#pragma once

#include <string>

#include <cublasLt.h>

namespace kiln::cuda {

struct LtApi {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtGetVersion) GetVersion;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
};

// The loaded table, or null when the library or one of its symbols cannot be found; then
// `why` (if given) says which, with dlerror's text. Loads once; thread-safe.
const LtApi* Lt(std::string* why = nullptr);

}  // namespace kiln::cuda
