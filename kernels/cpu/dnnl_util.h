// What every oneDNN-backed CPU kernel (matmul.cc, conv.cc) shares: the one engine (its ISA
// capped to kiln's), oneDNN exceptions as absl::Status, and per-thread user scratchpads.
#pragma once

#include "absl/status/status.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::cpu {

// The engine, created after capping oneDNN's ISA to kiln's (KILN_CPU_ISA=avx2 must make
// oneDNN pick its AVX2 kernels too). The cap only takes before oneDNN's first primitive;
// the engine is created before any, so a failure here can only mean oneDNN was built
// without the cap, and is ignored (the executor reports the ISA it resolved).
dnnl::engine& DnnlEngine();

// Internal "oneDNN <what> failed: <message> (status N)".
absl::Status DnnlError(const char* what, const dnnl::error& e);

// The calling thread's scratchpad for one primitive execution. Every primitive kiln makes
// is created with scratchpad_mode::user (DnnlUserScratchpad): in the default library mode
// oneDNN shares one scratchpad between primitives (Debian's build lacks
// ONEDNN_ENABLE_CONCURRENT_EXEC), so concurrent Run calls overwrote each other's partial
// results (Executor.ConcurrentRunsMatchSingleThreaded failed ~1 run in 15). A caller thread
// runs one primitive at a time (execute, then wait), so one growing buffer per thread
// serves. Throws dnnl::error when the buffer cannot be allocated.
dnnl::memory DnnlScratchpad(const dnnl::memory::desc& md);

// Primitive attributes with scratchpad_mode::user.
dnnl::primitive_attr DnnlUserScratchpad();

}  // namespace kiln::cpu
