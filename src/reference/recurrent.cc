// Reference kernels of ONNX's recurrent ops RNN, GRU and LSTM (opset 14 forms, which opsets 7
// and 22 share apart from `layout`). X is [seq, batch, input] (layout 0) or [batch, seq,
// input] (layout 1); W [D, G·H, input], R [D, G·H, H], B [D, 2·G·H] (Wb then Rb), with D = 2
// for direction "bidirectional" (forward then reverse) else 1, G = 1 / 3 / 4 gates, in the
// order i (RNN), z r h (GRU), i o f c (LSTM); P [D, 3·H] the LSTM peepholes i o f. Per step:
//  - RNN:  H = f(Xt·Wiᵀ + Hp·Riᵀ + Wbi + Rbi)
//  - GRU:  z = f(..z), r = f(..r), h = g(Xt·Whᵀ + (r⊙Hp)·Rhᵀ + Rbh + Wbh), or with
//          linear_before_reset h = g(Xt·Whᵀ + r⊙(Hp·Rhᵀ + Rbh) + Wbh); H = (1-z)⊙h + z⊙Hp
//  - LSTM: i = f(..i + Pi⊙Cp), f = f(..f + Pf⊙Cp) (1 - i with input_forget), c = g(..c),
//          C = f⊙Cp + i⊙c, o = f(..o + Po⊙C), H = o⊙h(C)
// `clip` bounds every gate's pre-activation to [-clip, clip] (as onnxruntime does, the cell
// state fed to h is not clipped). Activations default to Tanh (RNN), Sigmoid Tanh (GRU),
// Sigmoid Tanh Tanh (LSTM); the list holds one set, or two for bidirectional (one set is
// shared). Names match case-insensitively; Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
// HardSigmoid, Elu take activation_alpha / activation_beta in list order, each defaulting as
// the ONNX op of that name (Affine 1, 0; LeakyRelu 0.01; ThresholdedRelu 1; ScaledTanh 1, 1;
// HardSigmoid 0.2, 0.5; Elu 1).
// sequence_lens follows the spec and onnxruntime: batch row b runs its first len[b] steps
// (the reverse direction from step len[b]-1 down), Y is zero past them, Y_h (and Y_c) hold
// the state after its last step, zero when len[b] is 0. onnx's reference (op_rnn.py,
// op_gru.py, op_lstm.py) ignores sequence_lens, direction, activations, clip and
// input_forget; on the forward, default-activation, full-length models it can run the two
// agree. Outputs Y [seq, D, batch, H] ([batch, seq, D, H] for layout 1), Y_h, Y_c [D, batch,
// H] ([batch, D, H]); all num_outputs() of them are computed. Float dtypes only; computed
// in double, each output rounded once. Limits: each output at most 2^32 elements.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

enum class Cell { kRnn, kGru, kLstm };

enum class ActKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  double alpha = 0;
  double beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case ActKind::kRelu:
        return x > 0 ? x : 0.0;
      case ActKind::kTanh:
        return std::tanh(x);
      case ActKind::kSigmoid:
        return 1.0 / (1.0 + std::exp(-x));
      case ActKind::kAffine:
        return alpha * x + beta;
      case ActKind::kLeakyRelu:
        return x >= 0 ? x : alpha * x;
      case ActKind::kThresholdedRelu:
        return x > alpha ? x : 0.0;
      case ActKind::kScaledTanh:
        return alpha * std::tanh(beta * x);
      case ActKind::kHardSigmoid:
        return std::min(std::max(alpha * x + beta, 0.0), 1.0);
      case ActKind::kElu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case ActKind::kSoftsign:
        return x / (1.0 + std::fabs(x));
      case ActKind::kSoftplus:
        return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActSpec {
  const char* name;
  ActKind kind;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // defaults
};

constexpr ActSpec kActs[] = {
    {"relu", ActKind::kRelu, false, false, 0, 0},
    {"tanh", ActKind::kTanh, false, false, 0, 0},
    {"sigmoid", ActKind::kSigmoid, false, false, 0, 0},
    {"affine", ActKind::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", ActKind::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", ActKind::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", ActKind::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", ActKind::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", ActKind::kElu, true, false, 1.0, 0},
    {"softsign", ActKind::kSoftsign, false, false, 0, 0},
    {"softplus", ActKind::kSoftplus, false, false, 0, 0},
};

// The activations of each direction: acts[d][k] is the k-th function (f, g, h) of direction d.
absl::StatusOr<std::vector<std::vector<Activation>>> ParseActivations(const Node& node, Cell cell,
                                                                      int num_dir) {
  std::vector<std::string> names;
  switch (cell) {
    case Cell::kRnn:
      names = {"Tanh", "Tanh"};
      break;
    case Cell::kGru:
      names = {"Sigmoid", "Tanh"};
      break;
    case Cell::kLstm:
      names = {"Sigmoid", "Tanh", "Tanh"};
      break;
  }
  const size_t per_dir = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3;
  auto it = node.attrs().find("activations");
  if (it != node.attrs().end()) {
    const auto* list = std::get_if<std::vector<std::string>>(&it->second);
    if (list == nullptr) return Bad("activations must be a list of strings");
    names = *list;
  }
  // Bidirectional nodes may give one set for both directions.
  const bool shared = num_dir == 2 && names.size() == per_dir;
  const size_t used = shared ? per_dir : per_dir * static_cast<size_t>(num_dir);
  if (names.size() < used)
    return Bad(absl::StrCat("activations has ", names.size(), " entries; ", node.op(), " with ",
                            num_dir, " direction(s) needs ", per_dir * num_dir));
  const std::vector<float>* alphas = node.attr_floats("activation_alpha");
  const std::vector<float>* betas = node.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> parsed;
  for (size_t k = 0; k < used; ++k) {
    std::string lower = names[k];
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActs)
      if (lower == s.name) spec = &s;
    if (spec == nullptr)
      return absl::UnimplementedError(
          absl::StrCat(node.op(), " does not support activation '", names[k], "'"));
    Activation a{spec->kind, spec->alpha, spec->beta};
    if (spec->uses_alpha && alphas != nullptr && next_alpha < alphas->size())
      a.alpha = (*alphas)[next_alpha++];
    if (spec->uses_beta && betas != nullptr && next_beta < betas->size())
      a.beta = (*betas)[next_beta++];
    parsed.push_back(a);
  }
  std::vector<std::vector<Activation>> acts(static_cast<size_t>(num_dir));
  for (int d = 0; d < num_dir; ++d) {
    const size_t base = shared ? 0 : per_dir * static_cast<size_t>(d);
    acts[d].assign(parsed.begin() + base, parsed.begin() + base + per_dir);
  }
  return acts;
}

// Checks that `t` (when present) has the float dtype `dt` and dims `want`.
absl::Status CheckOperand(const Tensor* t, const char* name, DType dt,
                          const std::vector<int64_t>& want) {
  if (t == nullptr) return absl::OkStatus();
  if (t->dtype() != dt)
    return Bad(absl::StrCat(name, " has dtype ", DName(t->dtype()), ", X has ", DName(dt)));
  if (t->dims() != want)
    return Bad(absl::StrCat(name, " must be ", DimsStr(want), ", got ", DimsStr(t->dims())));
  return absl::OkStatus();
}

template <Cell C>
Result RecurrentKernel(const Node& node, Inputs in) {
  constexpr int64_t G = C == Cell::kRnn ? 1 : C == Cell::kGru ? 3 : 4;
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* r, Arg(in, 2, node.op()));
  const Tensor* b = OptArg(in, 3);
  const Tensor* lens = OptArg(in, 4);
  const Tensor* h0 = OptArg(in, 5);
  const Tensor* c0 = C == Cell::kLstm ? OptArg(in, 6) : nullptr;
  const Tensor* p = C == Cell::kLstm ? OptArg(in, 7) : nullptr;
  const DType dt = x->dtype();
  if (!IsFloat(dt)) return UnsupportedDType(node.op(), dt);

  const int64_t layout = node.attr_int_or("layout", 0);
  if (layout != 0 && layout != 1) return Bad(absl::StrCat("layout must be 0 or 1, got ", layout));
  const std::string* dir_attr = node.attr_string("direction");
  const std::string direction = dir_attr != nullptr ? *dir_attr : "forward";
  int num_dir;
  if (direction == "forward" || direction == "reverse") {
    num_dir = 1;
  } else if (direction == "bidirectional") {
    num_dir = 2;
  } else {
    return Bad(
        absl::StrCat("direction must be forward, reverse or bidirectional, got '", direction, "'"));
  }

  if (x->rank() != 3) return Bad(absl::StrCat("X must be 3-D, got ", DimsStr(x->dims())));
  const int64_t S = x->dims()[layout == 0 ? 0 : 1];
  const int64_t N = x->dims()[layout == 0 ? 1 : 0];
  const int64_t I = x->dims()[2];
  if (r->rank() != 3) return Bad(absl::StrCat("R must be 3-D, got ", DimsStr(r->dims())));
  const int64_t H = r->dims()[2];
  if (H > (int64_t{1} << 32)) return Bad(absl::StrCat("hidden size ", H, " is too large"));
  const int64_t D = num_dir;
  if (const std::optional<int64_t> hs = node.attr_int("hidden_size"); hs && *hs != H)
    return Bad(absl::StrCat("hidden_size ", *hs, " does not match R's last dim ", H));
  KILN_RETURN_IF_ERROR(CheckOperand(w, "W", dt, {D, G * H, I}));
  KILN_RETURN_IF_ERROR(CheckOperand(r, "R", dt, {D, G * H, H}));
  KILN_RETURN_IF_ERROR(CheckOperand(b, "B", dt, {D, 2 * G * H}));
  const std::vector<int64_t> state_dims =
      layout == 0 ? std::vector<int64_t>{D, N, H} : std::vector<int64_t>{N, D, H};
  KILN_RETURN_IF_ERROR(CheckOperand(h0, "initial_h", dt, state_dims));
  KILN_RETURN_IF_ERROR(CheckOperand(c0, "initial_c", dt, state_dims));
  KILN_RETURN_IF_ERROR(CheckOperand(p, "P", dt, {D, 3 * H}));

  const std::vector<int64_t> y_dims =
      layout == 0 ? std::vector<int64_t>{S, D, N, H} : std::vector<int64_t>{N, S, D, H};
  // Also bounds the states (S taken as at least 1) and the steps S·N·D (H taken as at least 1).
  const double y_count =
      static_cast<double>(std::max<int64_t>(S, 1)) * N * D * std::max<int64_t>(H, 1);
  if (y_count > static_cast<double>(int64_t{1} << 32))
    return absl::ResourceExhaustedError(
        absl::StrCat("output Y of shape ", DimsStr(y_dims), " is too large"));
  std::vector<int64_t> len(static_cast<size_t>(N), S);
  if (lens != nullptr) {
    if (lens->dtype() != DType::kI32 && lens->dtype() != DType::kI64)
      return Bad(absl::StrCat("sequence_lens must be int32, got ", DName(lens->dtype())));
    if (lens->dims() != std::vector<int64_t>{N})
      return Bad(absl::StrCat("sequence_lens must be [", N, "], got ", DimsStr(lens->dims())));
    for (int64_t n = 0; n < N; ++n) {
      len[n] = lens->GetAsInt64(n);
      if (len[n] < 0 || len[n] > S)
        return Bad(absl::StrCat("sequence_lens[", n, "] = ", len[n], " is outside [0, ", S, "]"));
    }
  }

  double clip = HUGE_VAL;
  if (node.has_attr("clip")) {
    const std::optional<float> cl = node.attr_float("clip");
    if (!cl || !(*cl > 0)) return Bad("clip must be a positive float");
    clip = *cl;
  }
  const bool linear_before_reset = node.attr_int_or("linear_before_reset", 0) != 0;
  const bool input_forget = node.attr_int_or("input_forget", 0) != 0;
  KILN_ASSIGN_OR_RETURN(auto acts, ParseActivations(node, C, num_dir));

  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, y_dims));
  KILN_ASSIGN_OR_RETURN(Tensor yh, Tensor::Create(dt, state_dims));
  Tensor yc;
  if (C == Cell::kLstm) {
    KILN_ASSIGN_OR_RETURN(yc, Tensor::Create(dt, state_dims));
  }

  const std::vector<double> xv = ToDoubles(*x), wv = ToDoubles(*w), rv = ToDoubles(*r);
  const std::vector<double> bv = b ? ToDoubles(*b) : std::vector<double>(D * 2 * G * H, 0.0);
  const std::vector<double> pv = p ? ToDoubles(*p) : std::vector<double>(D * 3 * H, 0.0);
  const std::vector<double> h0v = h0 ? ToDoubles(*h0) : std::vector<double>(D * N * H, 0.0);
  const std::vector<double> c0v = c0 ? ToDoubles(*c0) : std::vector<double>(D * N * H, 0.0);
  auto x_at = [&](int64_t t, int64_t n) {
    return xv.data() + (layout == 0 ? t * N + n : n * S + t) * I;
  };
  auto y_idx = [&](int64_t t, int64_t d, int64_t n) {
    return (layout == 0 ? (t * D + d) * N + n : (n * S + t) * D + d) * H;
  };
  auto state_idx = [&](int64_t d, int64_t n) { return (layout == 0 ? d * N + n : n * D + d) * H; };
  auto clipped = [clip](double v) { return std::min(std::max(v, -clip), clip); };

  std::vector<double> hp(H), cp(H), hn(H), cn(H), gx(G * H), gh(G * H), rh(H);
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const std::vector<Activation>& a = acts[d];
    const double* W = wv.data() + d * G * H * I;
    const double* R = rv.data() + d * G * H * H;
    const double* Wb = bv.data() + d * 2 * G * H;
    const double* Rb = Wb + G * H;
    const double* P = pv.data() + d * 3 * H;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t L = len[n];
      std::copy_n(h0v.data() + state_idx(d, n), H, hp.begin());
      std::copy_n(c0v.data() + state_idx(d, n), H, cp.begin());
      for (int64_t k = 0; k < L; ++k) {
        const int64_t t = reverse ? L - 1 - k : k;
        const double* xt = x_at(t, n);
        // gx = Xt·Wᵀ + Wb, gh = Hp·Rᵀ + Rb, per gate row.
        for (int64_t j = 0; j < G * H; ++j) {
          double sx = Wb[j], sh = Rb[j];
          for (int64_t i = 0; i < I; ++i) sx += W[j * I + i] * xt[i];
          for (int64_t i = 0; i < H; ++i) sh += R[j * H + i] * hp[i];
          gx[j] = sx;
          gh[j] = sh;
        }
        if constexpr (C == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = a[0](clipped(gx[j] + gh[j]));
        } else if constexpr (C == Cell::kGru) {
          std::vector<double>& z = cn;  // scratch: update gate
          for (int64_t j = 0; j < H; ++j) {
            z[j] = a[0](clipped(gx[j] + gh[j]));
            rh[j] = a[0](clipped(gx[H + j] + gh[H + j]));  // reset gate r
          }
          for (int64_t j = 0; j < H; ++j) {
            double pre;
            if (linear_before_reset) {
              pre = gx[2 * H + j] + rh[j] * gh[2 * H + j];
            } else {
              double s = Rb[2 * H + j];
              for (int64_t i = 0; i < H; ++i) s += R[(2 * H + j) * H + i] * (rh[i] * hp[i]);
              pre = gx[2 * H + j] + s;
            }
            const double hh = a[1](clipped(pre));
            hn[j] = (1 - z[j]) * hh + z[j] * hp[j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const double ig = a[0](clipped(gx[j] + gh[j] + P[j] * cp[j]));
            const double fg =
                input_forget ? 1.0 - ig
                             : a[0](clipped(gx[2 * H + j] + gh[2 * H + j] + P[2 * H + j] * cp[j]));
            const double cg = a[1](clipped(gx[3 * H + j] + gh[3 * H + j]));
            cn[j] = fg * cp[j] + ig * cg;
            const double og = a[0](clipped(gx[H + j] + gh[H + j] + P[H + j] * cn[j]));
            hn[j] = og * a[2](cn[j]);
          }
          cp.swap(cn);
        }
        hp.swap(hn);
        const int64_t yo = y_idx(t, d, n);
        for (int64_t j = 0; j < H; ++j) y.SetFromDouble(yo + j, hp[j]);
      }
      for (int64_t t = L; t < S; ++t) {
        const int64_t yo = y_idx(t, d, n);
        for (int64_t j = 0; j < H; ++j) y.SetFromDouble(yo + j, 0.0);
      }
      const int64_t so = state_idx(d, n);
      for (int64_t j = 0; j < H; ++j) {
        yh.SetFromDouble(so + j, L > 0 ? hp[j] : 0.0);
        if (C == Cell::kLstm) yc.SetFromDouble(so + j, L > 0 ? cp[j] : 0.0);
      }
    }
  }

  std::vector<Tensor> out;
  out.push_back(std::move(y));
  out.push_back(std::move(yh));
  out.push_back(std::move(yc));
  out.resize(static_cast<size_t>(std::min(node.num_outputs(), C == Cell::kLstm ? 3 : 2)));
  while (static_cast<int>(out.size()) < node.num_outputs()) out.emplace_back();
  return out;
}

}  // namespace

void RegisterRecurrentKernels(KernelTable& t) {
  t[KernelKey("", "RNN")] = &RecurrentKernel<Cell::kRnn>;
  t[KernelKey("", "GRU")] = &RecurrentKernel<Cell::kGru>;
  t[KernelKey("", "LSTM")] = &RecurrentKernel<Cell::kLstm>;
}

}  // namespace kiln::reference
