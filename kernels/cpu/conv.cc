// 2-D convolution through oneDNN (conv.h). oneDNN reports errors as dnnl::error
// exceptions; they are caught here and become absl::Status values.
#include "kernels/cpu/conv.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dnnl_util.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::cpu {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

absl::Status CheckConvDesc(const ConvDesc& d) {
  for (int64_t v : {d.batch, d.in_ch, d.in_h, d.in_w, d.out_ch, d.out_h, d.out_w, d.k_h, d.k_w,
                    d.group, d.stride_h, d.stride_w, d.dil_h, d.dil_w})
    if (v < 1) return absl::InvalidArgumentError("conv: every size must be at least 1");
  for (int64_t v : {d.pad_top, d.pad_left, d.pad_bottom, d.pad_right})
    if (v < 0) return absl::InvalidArgumentError("conv: negative padding");
  if (d.in_ch % d.group != 0 || d.out_ch % d.group != 0)
    return absl::InvalidArgumentError("conv: the groups must divide both channel counts");
  const int64_t span_h = (d.k_h - 1) * d.dil_h + 1, span_w = (d.k_w - 1) * d.dil_w + 1;
  const int64_t room_h = d.in_h + d.pad_top + d.pad_bottom - span_h;
  const int64_t room_w = d.in_w + d.pad_left + d.pad_right - span_w;
  if (room_h < 0 || room_w < 0 || room_h / d.stride_h + 1 != d.out_h ||
      room_w / d.stride_w + 1 != d.out_w)
    return absl::InvalidArgumentError(
        absl::StrCat("conv: output ", d.out_h, "x", d.out_w, " is not what the input ", d.in_h, "x",
                     d.in_w, ", kernel, strides, dilations and padding give"));
  return absl::OkStatus();
}

struct PackedConv::State {
  dnnl::convolution_forward prim;
  memory::desc src_md, dst_md, scratchpad_md;
  memory weights, bias;
  std::string impl;
};

PackedConv::PackedConv(std::unique_ptr<State> s) : s_(std::move(s)) {}
PackedConv::~PackedConv() = default;

absl::StatusOr<std::unique_ptr<PackedConv>> PackedConv::Create(const ConvDesc& d, const float* w,
                                                               const float* bias,
                                                               const CpuContext& ctx) {
  if (absl::Status s = CheckConvDesc(d); !s.ok()) return s;
  ScopedOmpThreads threads(ctx.threads());
  try {
    auto st = std::make_unique<State>();
    dnnl::engine& eng = DnnlEngine();
    st->src_md = memory::desc({d.batch, d.in_ch, d.in_h, d.in_w}, dt::f32, tag::nchw);
    st->dst_md = memory::desc({d.batch, d.out_ch, d.out_h, d.out_w}, dt::f32, tag::nchw);
    const int64_t cg = d.in_ch / d.group, mg = d.out_ch / d.group;
    const memory::dims wdims = d.group == 1 ? memory::dims{d.out_ch, cg, d.k_h, d.k_w}
                                            : memory::dims{d.group, mg, cg, d.k_h, d.k_w};
    const memory::desc w_plain(wdims, dt::f32, d.group == 1 ? tag::oihw : tag::goihw);
    const memory::desc w_any(wdims, dt::f32, tag::any);
    const memory::desc b_md({d.out_ch}, dt::f32, tag::a);
    // oneDNN counts dilation from 0 (no dilation) where ONNX counts from 1.
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, st->src_md, w_any,
        b_md, st->dst_md, {d.stride_h, d.stride_w}, {d.dil_h - 1, d.dil_w - 1},
        {d.pad_top, d.pad_left}, {d.pad_bottom, d.pad_right});
    dnnl::convolution_forward::primitive_desc pd(desc, DnnlUserScratchpad(), eng);
    st->prim = dnnl::convolution_forward(pd);
    st->scratchpad_md = pd.scratchpad_desc();
    st->impl = pd.impl_info_str();
    st->weights = memory(pd.weights_desc(), eng);
    memory src(w_plain, eng, const_cast<float*>(w));
    dnnl::stream s(eng);
    dnnl::reorder(src, st->weights).execute(s, src, st->weights);
    st->bias = memory(b_md, eng);
    std::vector<float> zeros;
    if (bias == nullptr) zeros.assign(static_cast<size_t>(d.out_ch), 0.f);
    memory bsrc(b_md, eng, const_cast<float*>(bias ? bias : zeros.data()));
    dnnl::reorder(bsrc, st->bias).execute(s, bsrc, st->bias);
    s.wait();
    return std::unique_ptr<PackedConv>(new PackedConv(std::move(st)));
  } catch (const dnnl::error& e) {
    return DnnlError("convolution setup", e);
  }
}

absl::Status PackedConv::Run(const CpuContext& ctx, const float* x, float* y) const {
  ScopedOmpThreads threads(ctx.threads());
  try {
    dnnl::engine& eng = DnnlEngine();
    memory src(s_->src_md, eng, const_cast<float*>(x));
    memory dst(s_->dst_md, eng, y);
    dnnl::stream s(eng);
    s_->prim.execute(s, {{DNNL_ARG_SRC, src},
                         {DNNL_ARG_WEIGHTS, s_->weights},
                         {DNNL_ARG_BIAS, s_->bias},
                         {DNNL_ARG_DST, dst},
                         {DNNL_ARG_SCRATCHPAD, DnnlScratchpad(s_->scratchpad_md)}});
    s.wait();
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return DnnlError("convolution", e);
  }
}

const char* PackedConv::ImplName() const { return s_->impl.c_str(); }

}  // namespace kiln::cpu
