// oneDNN helpers shared by the CPU kernels (dnnl_util.h).
#include "kernels/cpu/dnnl_util.h"

#include <cstddef>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

dnnl::engine& DnnlEngine() {
  static dnnl::engine* engine = [] {
    switch (DetectIsa()) {
      case Isa::kAvx2:
        (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
        break;
      case Isa::kScalar:
        (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_sse41);
        break;
      default:
        break;
    }
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *engine;
}

absl::Status DnnlError(const char* what, const dnnl::error& e) {
  return absl::InternalError(absl::StrCat("oneDNN ", what, " failed: ", e.what(), " (status ",
                                          static_cast<int>(e.status), ")"));
}

dnnl::memory DnnlScratchpad(const dnnl::memory::desc& md) {
  struct Buffer {
    std::byte* data = nullptr;
    size_t bytes = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buf;
  const size_t need = md.get_size();
  if (need > buf.bytes) {
    std::free(buf.data);
    buf.bytes = (need + 4095) / 4096 * 4096;
    buf.data = static_cast<std::byte*>(std::aligned_alloc(64, buf.bytes));
    if (buf.data == nullptr) {
      buf.bytes = 0;
      throw dnnl::error(dnnl_out_of_memory, "scratchpad allocation");
    }
  }
  return dnnl::memory(md, DnnlEngine(), need > 0 ? buf.data : nullptr);
}

dnnl::primitive_attr DnnlUserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace kiln::cpu
