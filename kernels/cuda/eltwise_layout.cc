// Host-side broadcast layout of the eltwise kernel (eltwise.h); tested on the CPU.
#include "kernels/cuda/eltwise.h"

namespace kiln::cuda {

bool EltwiseLayout(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins,
                   EltwiseArgs* a) {
  const int r = static_cast<int>(out.size());
  const int k = static_cast<int>(ins.size());
  if (k > 3) return false;
  // Full-rank strides per input (0 where the input broadcasts).
  std::vector<std::vector<int64_t>> st(k, std::vector<int64_t>(r, 0));
  for (int i = 0; i < k; ++i) {
    const std::vector<int64_t>& d = ins[i];
    if (static_cast<int>(d.size()) > r) return false;
    const int shift = r - static_cast<int>(d.size());
    int64_t stride = 1;
    for (int j = static_cast<int>(d.size()) - 1; j >= 0; --j) {
      if (d[j] != out[j + shift] && d[j] != 1) return false;
      if (d[j] == out[j + shift] && d[j] != 1) st[i][j + shift] = stride;
      stride *= d[j];
    }
  }
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  a->n = n;
  a->num_inputs = k;
  // Drop size-1 dims, then merge dim j into j+1 when every operand's strides allow it.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> cs(k);
  for (int j = 0; j < r; ++j) {
    if (out[j] == 1) continue;
    const bool merge = !dims.empty() && [&] {
      for (int i = 0; i < k; ++i)
        if (cs[i].back() != st[i][j] * out[j]) return false;
      return true;
    }();
    if (merge) {
      dims.back() *= out[j];
      for (int i = 0; i < k; ++i) cs[i].back() = st[i][j];
    } else {
      dims.push_back(out[j]);
      for (int i = 0; i < k; ++i) cs[i].push_back(st[i][j]);
    }
  }
  if (static_cast<int>(dims.size()) > kMaxRank) return false;
  a->rank = static_cast<int>(dims.size());
  for (int j = 0; j < a->rank; ++j) a->dims[j] = dims[j];
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < a->rank; ++j) a->in[i].strides[j] = cs[i][j];
  // Every input dense in the output's order: index it by the flat output index.
  bool contiguous = true;
  for (int i = 0; i < k && contiguous; ++i) {
    int64_t expect = 1;
    for (int j = a->rank - 1; j >= 0; --j) {
      if (a->in[i].strides[j] != expect) contiguous = false;
      expect *= a->dims[j];
    }
  }
  a->contiguous = contiguous;
  return true;
}

}  // namespace kiln::cuda
