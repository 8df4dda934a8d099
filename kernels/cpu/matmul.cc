// Linear (kiln or oneDNN backend) and oneDNN batched MatMul (see matmul.h). oneDNN reports
// errors as dnnl::error exceptions; they are caught here and become absl::Status values.
#include "kernels/cpu/matmul.h"

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/panel_gemm.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::post_ops PostOps(Activation act) {
  dnnl::post_ops po;
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kGeluErf:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case Activation::kGeluTanh:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case Activation::kRelu:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case Activation::kTanh:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f);
      break;
  }
  return po;
}

}  // namespace

struct PackedLinear::State {
  Isa isa = Isa::kScalar;                      // resolved at Create
  GemmBackend requested = GemmBackend::kAuto;  // LinearDesc::backend
  GemmBackend backend = GemmBackend::kOneDnn;  // the one for typical_m
  std::vector<float> plain_bias;               // [N] or empty
  // bf16 weights: oneDNN's bf16 matmul on X converted to bf16 (native), or the fp32
  // backends on weights widened at Create and X rounded to bf16 (widened).
  bool bf16_native = false, bf16_widened = false;
  // The kiln backend, packed on first use by an M it is chosen for.
  mutable std::unique_ptr<PanelGemm> panel;
  int64_t weight = 0;  // K·N, for the table's large-weight rules
  GemmBackend BackendFor(int64_t m) const {
    return bf16_native ? GemmBackend::kOneDnn : ResolveGemmBackend(requested, isa, m, weight);
  }
  absl::StatusOr<const PanelGemm*> Panel(const LinearDesc& d) const;
  // The caller's weights, which both backends pack from; then oneDNN's state.
  memory::desc plain_w_md;             // the caller's layout, kept only for re-packing
  std::vector<float> plain_w;          // owned copy (or the widened bf16), unless borrowed
  std::vector<uint16_t> plain_w_bf16;  // owned bf16 copy, unless borrowed
  const void* plain = nullptr;         // the owned copy or the caller's (borrowed) weights
  const float* plain_f32() const { return static_cast<const float*>(plain); }
  memory bias;  // [1, N] or empty
  struct Packed {
    memory::desc md;
    memory mem;
  };
  struct Prim {
    dnnl::matmul prim;
    memory::desc scratchpad;
    size_t packed_index;
    std::string impl;
  };
  mutable std::mutex mu;
  mutable std::vector<Packed> packed;                     // weight layouts in use
  mutable std::map<std::pair<int64_t, int>, Prim> prims;  // (M, threads) -> primitive

  // Primitive for m rows (creating and caching it, and a weight layout, on first use).
  absl::StatusOr<const Prim*> Get(const LinearDesc& d, int64_t m, int threads) const;
};

absl::StatusOr<const PanelGemm*> PackedLinear::State::Panel(const LinearDesc& d) const {
  std::lock_guard<std::mutex> lock(mu);
  if (!panel) {
    auto g = PanelGemm::Pack(isa, d.k, d.n, d.trans_w, plain_f32(),
                             plain_bias.empty() ? nullptr : plain_bias.data());
    if (!g.ok()) return g.status();
    panel = *std::move(g);
  }
  return panel.get();
}

PackedLinear::PackedLinear(const LinearDesc& desc)
    : desc_(desc), state_(std::make_unique<State>()) {}
PackedLinear::~PackedLinear() = default;

absl::StatusOr<const PackedLinear::State::Prim*> PackedLinear::State::Get(const LinearDesc& d,
                                                                          int64_t m,
                                                                          int threads) const {
  std::lock_guard<std::mutex> lock(mu);
  auto it = prims.find({m, threads});
  if (it != prims.end()) return &it->second;
  ScopedOmpThreads omp_threads(threads);
  try {
    const dt in_dt = bf16_native ? dt::bf16 : dt::f32;
    memory::desc src_md({m, d.k}, in_dt, tag::ab);
    memory::desc w_any({d.k, d.n}, in_dt, tag::any);
    memory::desc dst_md({m, d.n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr = DnnlUserScratchpad();
    attr.set_post_ops(PostOps(d.activation));
    std::unique_ptr<dnnl::matmul::desc> md;
    if (bias) {
      md = std::make_unique<dnnl::matmul::desc>(src_md, w_any, bias.get_desc(), dst_md);
    } else {
      md = std::make_unique<dnnl::matmul::desc>(src_md, w_any, dst_md);
    }
    dnnl::matmul::primitive_desc pd(*md, attr, DnnlEngine());
    const memory::desc want = pd.weights_desc();
    size_t index = packed.size();
    for (size_t i = 0; i < packed.size(); ++i)
      if (packed[i].md == want) index = i;
    if (index == packed.size()) {
      memory src(plain_w_md, DnnlEngine(), const_cast<void*>(plain));
      memory dst(want, DnnlEngine());
      dnnl::stream s(DnnlEngine());
      dnnl::reorder(src, dst).execute(s, src, dst);
      s.wait();
      packed.push_back({want, dst});
    }
    Prim p{dnnl::matmul(pd), pd.scratchpad_desc(), index, pd.impl_info_str()};
    return &prims.emplace(std::make_pair(m, threads), std::move(p)).first->second;
  } catch (const dnnl::error& e) {
    return DnnlError("matmul primitive creation", e);
  }
}

absl::StatusOr<std::unique_ptr<PackedLinear>> PackedLinear::Create(const LinearDesc& desc,
                                                                   const void* w, const float* bias,
                                                                   const CpuContext& ctx,
                                                                   int64_t typical_m,
                                                                   bool borrow_weights) {
  if (desc.k <= 0 || desc.n <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("Linear needs K > 0 and N > 0, got K=", desc.k, " N=", desc.n));
  if (w == nullptr) return absl::InvalidArgumentError("Linear weights pointer is null");
  std::unique_ptr<PackedLinear> pl(new PackedLinear(desc));
  State& st = *pl->state_;
  st.isa = ctx.ResolvedIsa();
  st.requested = desc.backend;
  st.weight = desc.k * desc.n;
  st.bf16_native = desc.bf16_weights && HasAvx512Bf16(st.isa);
  st.bf16_widened = desc.bf16_weights && !st.bf16_native;
  st.backend = st.BackendFor(std::max<int64_t>(typical_m, 1));
  if (bias != nullptr) st.plain_bias.assign(bias, bias + desc.n);
  const int64_t kn = desc.k * desc.n;
  try {
    st.plain_w_md = memory::desc({desc.k, desc.n}, st.bf16_native ? dt::bf16 : dt::f32,
                                 desc.trans_w ? tag::ba : tag::ab);
    if (st.bf16_widened) {
      st.plain_w.resize(kn);
      Bf16ToFloat(static_cast<const uint16_t*>(w), kn, st.plain_w.data());
      st.plain = st.plain_w.data();
    } else if (borrow_weights) {
      st.plain = w;
    } else if (st.bf16_native) {
      const auto* p = static_cast<const uint16_t*>(w);
      st.plain_w_bf16.assign(p, p + kn);
      st.plain = st.plain_w_bf16.data();
    } else {
      const auto* p = static_cast<const float*>(w);
      st.plain_w.assign(p, p + kn);
      st.plain = st.plain_w.data();
    }
    if (bias != nullptr) {
      st.bias = memory(memory::desc({1, desc.n}, dt::f32, tag::ab), DnnlEngine());
      std::copy(bias, bias + desc.n, static_cast<float*>(st.bias.get_data_handle()));
    }
  } catch (const dnnl::error& e) {
    return DnnlError("Linear weight setup", e);
  }
  // Pack for the typical batch now so that load time, not the first call, pays for it.
  if (st.backend == GemmBackend::kKiln) {
    if (auto g = st.Panel(desc); !g.ok()) return g.status();
  } else {
    auto prim = st.Get(desc, std::max<int64_t>(typical_m, 1), ctx.threads());
    if (!prim.ok()) return prim.status();
  }
  return pl;
}

absl::Status PackedLinear::Run(const CpuContext& ctx, const float* x, int64_t m, float* y) const {
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("Linear got M=", m));
  if (m == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr)
    return absl::InvalidArgumentError("Linear input or output pointer is null");
  // bf16 weights: X rounded to bf16 (into the calling thread's scratch; the workers of the
  // GEMM's parallel region only read it), as bf16 values or widened back for fp32.
  thread_local std::vector<uint16_t> x_bf16;
  thread_local std::vector<float> x_rounded;
  const void* src_data = x;
  const int64_t mk = m * desc_.k;
  if (state_->bf16_native) {
    if (x_bf16.size() < static_cast<size_t>(mk)) x_bf16.resize(mk);
    const Isa isa = state_->isa;
    uint16_t* xb = x_bf16.data();  // the caller's scratch (a thread_local named in the lambda
                                   // would be each worker's own)
    ParallelFor(ctx, mk, 1 << 15,
                [&](int64_t b, int64_t e) { ConvertToBf16(x + b, e - b, xb + b, isa); });
    src_data = xb;
  } else if (state_->bf16_widened) {
    if (x_rounded.size() < static_cast<size_t>(mk)) x_rounded.resize(mk);
    float* xr = x_rounded.data();
    ParallelFor(ctx, mk, 1 << 15, [&](int64_t b, int64_t e) { RoundToBf16(x + b, e - b, xr + b); });
    x = xr;
    src_data = xr;
  }
  static_assert(
      static_cast<int>(Activation::kGeluErf) == 1 && static_cast<int>(Activation::kGeluTanh) == 2 &&
      static_cast<int>(Activation::kRelu) == 3 && static_cast<int>(Activation::kTanh) == 4);
  if (state_->BackendFor(m) == GemmBackend::kKiln) {
    auto g = state_->Panel(desc_);
    if (!g.ok()) return g.status();
    return (*g)->Run(ctx, x, m, y, static_cast<int>(desc_.activation));
  }
  auto prim_or = state_->Get(desc_, m, ctx.threads());
  if (!prim_or.ok()) return prim_or.status();
  const State::Prim& p = **prim_or;
  ScopedOmpThreads omp_threads(ctx.threads());
  try {
    memory src(memory::desc({m, desc_.k}, state_->bf16_native ? dt::bf16 : dt::f32, tag::ab),
               DnnlEngine(), const_cast<void*>(src_data));
    memory dst(memory::desc({m, desc_.n}, dt::f32, tag::ab), DnnlEngine(), y);
    memory w;
    {
      std::lock_guard<std::mutex> lock(state_->mu);  // `packed` may grow concurrently
      w = state_->packed[p.packed_index].mem;
    }
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
    if (state_->bias) args[DNNL_ARG_BIAS] = state_->bias;
    args[DNNL_ARG_SCRATCHPAD] = DnnlScratchpad(p.scratchpad);
    dnnl::stream s(DnnlEngine());
    p.prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    return DnnlError("matmul execution", e);
  }
  return absl::OkStatus();
}

GemmBackend PackedLinear::backend() const { return state_->backend; }

absl::StatusOr<std::string> PackedLinear::ImplName(const CpuContext& ctx, int64_t m) const {
  const char* widened = state_->bf16_widened ? " (bf16 widened)" : "";
  if (state_->BackendFor(m) == GemmBackend::kKiln) {
    auto g = state_->Panel(desc_);
    if (!g.ok()) return g.status();
    return absl::StrCat("kiln:", std::string(IsaName((*g)->isa())), ":", (*g)->tile_m(), "x",
                        (*g)->tile_n(), widened);
  }
  auto p = state_->Get(desc_, m, ctx.threads());
  if (!p.ok()) return p.status();
  return absl::StrCat("onednn:", (*p)->impl, widened);
}

// ---------------------------------------------------------------------------------------

namespace {

using BmmKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, float, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int>;

struct BmmCache {
  struct Prim {
    dnnl::matmul prim;
    memory::desc scratchpad;
  };
  std::mutex mu;
  std::map<BmmKey, Prim> prims;
};

}  // namespace

absl::Status BatchedMatMul(const CpuContext& ctx, const BatchedMatMulDesc& d, const float* a,
                           const float* b, float* c) {
  if (d.batch <= 0 || d.m <= 0 || d.n <= 0 || d.k <= 0)
    return absl::InvalidArgumentError(absl::StrCat("BatchedMatMul needs positive sizes, got batch=",
                                                   d.batch, " M=", d.m, " N=", d.n, " K=", d.k));
  if (d.lda < d.k || d.ldc < d.n || d.ldb < (d.trans_b ? d.k : d.n))
    return absl::InvalidArgumentError("BatchedMatMul row strides are smaller than the rows");
  static BmmCache* cache = new BmmCache;
  const int threads = ctx.threads();
  const BmmKey key{d.batch, d.m,   d.n,  d.k,   d.trans_b, d.alpha, d.lda,
                   d.sa,    d.ldb, d.sb, d.ldc, d.sc,      threads};
  ScopedOmpThreads omp_threads(threads);
  try {
    memory::desc a_md({d.batch, d.m, d.k}, dt::f32, memory::dims{d.sa, d.lda, 1});
    memory::desc b_md({d.batch, d.k, d.n}, dt::f32,
                      d.trans_b ? memory::dims{d.sb, 1, d.ldb} : memory::dims{d.sb, d.ldb, 1});
    memory::desc c_md({d.batch, d.m, d.n}, dt::f32, memory::dims{d.sc, d.ldc, 1});
    BmmCache::Prim prim;
    {
      std::lock_guard<std::mutex> lock(cache->mu);
      auto it = cache->prims.find(key);
      if (it == cache->prims.end()) {
        dnnl::primitive_attr attr = DnnlUserScratchpad();
        if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, DnnlEngine());
        it =
            cache->prims.emplace(key, BmmCache::Prim{dnnl::matmul(pd), pd.scratchpad_desc()}).first;
      }
      prim = it->second;
    }
    memory am(a_md, DnnlEngine(), const_cast<float*>(a));
    memory bm(b_md, DnnlEngine(), const_cast<float*>(b));
    memory cm(c_md, DnnlEngine(), c);
    dnnl::stream s(DnnlEngine());
    prim.prim.execute(s, {{DNNL_ARG_SRC, am},
                          {DNNL_ARG_WEIGHTS, bm},
                          {DNNL_ARG_DST, cm},
                          {DNNL_ARG_SCRATCHPAD, DnnlScratchpad(prim.scratchpad)}});
    s.wait();
  } catch (const dnnl::error& e) {
    return DnnlError("batched matmul", e);
  }
  return absl::OkStatus();
}

}  // namespace kiln::cpu
