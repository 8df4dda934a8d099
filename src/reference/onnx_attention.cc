// Reference kernel of the ONNX Attention op (opsets 23 and 24): scaled dot-product
// attention over 4-D [batch, heads, seq, head_size] or 3-D [batch, seq, heads * head_size]
// Q/K/V, with grouped K/V heads (q head h reads kv head h / (q_heads / kv_heads)), an
// optional boolean or additive mask (its last dim may be shorter than the total length and
// is padded with "masked"), `is_causal` (upper-left aligned after the past: query i sees
// key j when j <= past + i), the past/present key-value cache (present = past ++ new),
// `nonpad_kv_seqlen` (keys at or beyond a row's length masked), `softcap` (c·tanh(s/c)
// before the mask) and the four `qk_matmul_output_mode`s. It follows onnx's own reference
// implementation (onnx/reference/ops/op_attention.py) step for step, including NaN rows
// where every key is masked. Accumulates in double, one rounding per output; the scale is
// applied to the scores (the spec scales Q and K by its square root, the same value up to
// rounding). Limits: plain loops (clarity over speed); `softmax_precision` changes nothing
// (the softmax is computed in double).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

constexpr double kMasked = -std::numeric_limits<double>::infinity();

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

// One of Q, K, V as [batch][heads][seq][size] doubles.
struct Heads {
  int64_t batch = 0, heads = 0, seq = 0, size = 0;
  std::vector<double> v;
  double at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return v[((b * heads + h) * seq + s) * size + d];
  }
};

absl::StatusOr<Heads> ReadHeads(const Tensor& t, int64_t heads_attr, const char* what) {
  Heads r;
  const auto& d = t.dims();
  const std::vector<double> x = ToDoubles(t);
  if (t.rank() == 4) {
    r = {d[0], d[1], d[2], d[3], x};
    return r;
  }
  if (heads_attr <= 0)
    return Bad(absl::StrCat(what,
                            " is 3-D, which needs the q_num_heads and kv_num_heads "
                            "attributes"));
  if (d[2] % heads_attr != 0)
    return Bad(absl::StrCat(what, " hidden size ", d[2], " is not a multiple of its ", heads_attr,
                            " heads"));
  r = {d[0], heads_attr, d[1], d[2] / heads_attr, std::vector<double>(x.size())};
  for (int64_t b = 0; b < r.batch; ++b)
    for (int64_t s = 0; s < r.seq; ++s)
      for (int64_t h = 0; h < r.heads; ++h)
        for (int64_t e = 0; e < r.size; ++e)
          r.v[((b * r.heads + h) * r.seq + s) * r.size + e] =
              x[(b * r.seq + s) * d[2] + h * r.size + e];
  return r;
}

// past ++ cur along the sequence.
absl::StatusOr<Heads> Concat(const Tensor* past, const Heads& cur, const char* what) {
  if (past == nullptr) return cur;
  const auto& d = past->dims();
  if (past->rank() != 4 || d[0] != cur.batch || d[1] != cur.heads || d[3] != cur.size)
    return Bad(absl::StrCat(what, " has shape ", DimsStr(d), "; expected [", cur.batch, ", ",
                            cur.heads, ", past, ", cur.size, "]"));
  Heads r{cur.batch, cur.heads, d[2] + cur.seq, cur.size, {}};
  r.v.resize(r.batch * r.heads * r.seq * r.size);
  const std::vector<double> p = ToDoubles(*past);
  for (int64_t bh = 0; bh < r.batch * r.heads; ++bh)
    for (int64_t s = 0; s < r.seq; ++s)
      for (int64_t e = 0; e < r.size; ++e)
        r.v[(bh * r.seq + s) * r.size + e] = s < d[2]
                                                 ? p[(bh * d[2] + s) * r.size + e]
                                                 : cur.v[(bh * cur.seq + s - d[2]) * r.size + e];
  return r;
}

Tensor Write(DType dt, const Heads& h) {
  return FromDoubles(dt, {h.batch, h.heads, h.seq, h.size}, h.v);
}

Result AttentionKernel(const Node& node, Inputs in) {
  const std::string& op = node.op();
  KILN_ASSIGN_OR_RETURN(const Tensor* q_t, Arg(in, 0, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* k_t, Arg(in, 1, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* v_t, Arg(in, 2, op));
  const Tensor* mask_t = OptArg(in, 3);
  const Tensor* past_k = OptArg(in, 4);
  const Tensor* past_v = OptArg(in, 5);
  const Tensor* nonpad = OptArg(in, 6);
  for (const Tensor* t : {q_t, k_t, v_t, past_k, past_v})
    if (t && !IsFloat(t->dtype())) return UnsupportedDType(op, t->dtype());
  const int rank = q_t->rank();
  if ((rank != 3 && rank != 4) || k_t->rank() != rank || v_t->rank() != rank)
    return Bad(absl::StrCat("Q, K and V must all be 3-D or all 4-D, got ranks ", q_t->rank(), ", ",
                            k_t->rank(), ", ", v_t->rank()));
  if ((past_k == nullptr) != (past_v == nullptr))
    return Bad("past_key and past_value must be given together");
  if (nonpad && past_k) return Bad("nonpad_kv_seqlen cannot be used with past_key/past_value");
  const int64_t q_heads_attr = node.attr_int_or("q_num_heads", 0);
  const int64_t kv_heads_attr = node.attr_int_or("kv_num_heads", 0);
  KILN_ASSIGN_OR_RETURN(Heads q, ReadHeads(*q_t, q_heads_attr, "Q"));
  KILN_ASSIGN_OR_RETURN(Heads k_new, ReadHeads(*k_t, kv_heads_attr, "K"));
  KILN_ASSIGN_OR_RETURN(Heads v_new, ReadHeads(*v_t, kv_heads_attr, "V"));
  if (k_new.batch != q.batch || v_new.batch != q.batch)
    return Bad("Q, K and V must have the same batch size");
  if (k_new.size != q.size)
    return Bad(absl::StrCat("K's head size ", k_new.size, " differs from Q's ", q.size));
  if (v_new.heads != k_new.heads || v_new.seq != k_new.seq)
    return Bad("K and V must have the same heads and sequence length");
  if (k_new.heads == 0 || q.heads % k_new.heads != 0)
    return Bad(absl::StrCat("Q's ", q.heads, " heads are not a multiple of K/V's ", k_new.heads));
  KILN_ASSIGN_OR_RETURN(Heads k, Concat(past_k, k_new, "past_key"));
  KILN_ASSIGN_OR_RETURN(Heads v, Concat(past_v, v_new, "past_value"));
  const int64_t past = past_k ? past_k->dims()[2] : 0;
  const int64_t sq = q.seq, total = k.seq, group = q.heads / k.heads;

  const std::optional<float> scale_attr = node.attr_float("scale");
  const double scale = scale_attr ? *scale_attr : 1.0 / std::sqrt(static_cast<double>(q.size));
  const double softcap = node.attr_float_or("softcap", 0.0f);
  const bool causal = node.attr_int_or("is_causal", 0) != 0;
  const int64_t mode = node.attr_int_or("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return Bad(absl::StrCat("qk_matmul_output_mode must be 0 to 3, got ", mode));

  // The mask, broadcast to [batch, q_heads, sq, mask_len] with mask_len <= total.
  std::vector<int64_t> mask_off;
  std::vector<double> mask_v;
  int64_t mask_len = 0;
  const std::vector<int64_t> score_dims = {q.batch, q.heads, sq, total};
  if (mask_t) {
    if (mask_t->rank() < 1 || mask_t->rank() > 4)
      return Bad(absl::StrCat("attn_mask must have rank 1 to 4, got ", mask_t->rank()));
    if (mask_t->dtype() != DType::kBool && !IsFloat(mask_t->dtype()))
      return UnsupportedDType(op, mask_t->dtype());
    mask_len = mask_t->dims().back();
    if (mask_len > total)
      return Bad(absl::StrCat("attn_mask's last dim ", mask_len,
                              " exceeds the total sequence "
                              "length ",
                              total));
    std::vector<int64_t> target = score_dims;
    target.back() = mask_len;
    if (!BroadcastsTo(mask_t->dims(), target))
      return Bad(absl::StrCat("attn_mask of shape ", DimsStr(mask_t->dims()),
                              " does not broadcast to ", DimsStr(target)));
    mask_off = BroadcastOffsets(mask_t->dims(), target);
    mask_v = ToDoubles(*mask_t);
    if (mask_t->dtype() == DType::kBool)
      for (double& m : mask_v) m = m != 0 ? 0.0 : kMasked;
  }
  std::vector<int64_t> lengths;
  if (nonpad) {
    if (nonpad->dtype() != DType::kI64 || nonpad->rank() != 1 || nonpad->dims()[0] != q.batch)
      return Bad(absl::StrCat("nonpad_kv_seqlen must be i64 [", q.batch, "]"));
    lengths = ToInt64Vector(*nonpad);
  }

  const int64_t rows = q.batch * q.heads * sq;
  std::vector<double> y(rows * v.size), qk(rows * total);
  std::vector<double> raw(total), p(total);
  for (int64_t b = 0; b < q.batch; ++b)
    for (int64_t h = 0; h < q.heads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t row = (b * q.heads + h) * sq + i, kvh = h / group;
        for (int64_t j = 0; j < total; ++j) {
          double s = 0;
          for (int64_t e = 0; e < q.size; ++e) s += q.at(b, h, i, e) * k.at(b, kvh, j, e);
          s *= scale;
          if (mode == 0) qk[row * total + j] = s;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          if (mode == 1) qk[row * total + j] = s;
          double bias = 0;
          if (mask_t) bias += j < mask_len ? mask_v[mask_off[row * mask_len + j]] : kMasked;
          if (causal && j >= past && j - past > i) bias += kMasked;
          if (nonpad && j >= lengths[b]) bias += kMasked;
          raw[j] = s + bias;
          if (mode == 2) qk[row * total + j] = raw[j];
        }
        // Softmax as the reference writes it: a row with every key masked is NaN.
        double mx = kMasked;
        for (int64_t j = 0; j < total; ++j) mx = std::max(mx, raw[j]);
        double sum = 0;
        for (int64_t j = 0; j < total; ++j) sum += p[j] = std::exp(raw[j] - mx);
        for (int64_t j = 0; j < total; ++j) {
          p[j] /= sum;
          if (mode == 3) qk[row * total + j] = p[j];
        }
        for (int64_t e = 0; e < v.size; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j) acc += p[j] * v.at(b, kvh, j, e);
          y[row * v.size + e] = acc;
        }
      }

  std::vector<Tensor> outs;
  if (rank == 4) {
    outs.push_back(FromDoubles(q_t->dtype(), {q.batch, q.heads, sq, v.size}, y));
  } else {
    std::vector<double> y3(y.size());
    for (int64_t b = 0; b < q.batch; ++b)
      for (int64_t h = 0; h < q.heads; ++h)
        for (int64_t i = 0; i < sq; ++i)
          for (int64_t e = 0; e < v.size; ++e)
            y3[((b * sq + i) * q.heads + h) * v.size + e] =
                y[((b * q.heads + h) * sq + i) * v.size + e];
    outs.push_back(FromDoubles(q_t->dtype(), {q.batch, sq, q.heads * v.size}, y3));
  }
  if (node.num_outputs() > 1) outs.push_back(Write(k_t->dtype(), k));
  if (node.num_outputs() > 2) outs.push_back(Write(v_t->dtype(), v));
  if (node.num_outputs() > 3) outs.push_back(FromDoubles(q_t->dtype(), score_dims, qk));
  return outs;
}

}  // namespace

void RegisterOnnxAttentionKernels(KernelTable& table) {
  table[KernelKey("", "Attention")] = &AttentionKernel;
}

}  // namespace kiln::reference
