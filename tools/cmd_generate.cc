// `kiln generate PLAN.kiln`: KV-cached generation with kiln::GenerationSession (a plan
// compiled with --decode-context): prefill the prompts, then decode one token per sequence
// per step, greedy or sampled; prints the tokens, time to first token, decode tokens/s
// and the cache memory (docs/cli.md, docs/generation.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kiln/generation.h"
#include "kiln/support/npy.h"
#include "tools/cli.h"
#include "tools/json.h"
#include "tools/plan_util.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln generate PLAN.kiln --prompt-ids IDS [options]\n"
    "\n"
    "Generates tokens with a KV-cache decoder compiled with `kiln compile --decode-context`\n"
    "(docs/generation.md): one prefill of the prompts, then one decode step per new token\n"
    "that appends to the cache in place. Prints the generated ids per sequence, the time to\n"
    "first token (the prefill and the first token's choice), decode tokens/s (all sequences)\n"
    "and the cache memory. A cpu plan keeps the cache in host memory, a cuda plan in the\n"
    "GPU's.\n"
    "\n"
    "options:\n"
    "  --prompt-ids IDS         a prompt: comma-separated token ids (1,2,3) or FILE.npy\n"
    "                           (int64 [n] for one prompt, [b, n] for b prompts of n tokens).\n"
    "                           Repeatable: each one more sequence of the batch; lengths may\n"
    "                           differ\n"
    "  --max-new-tokens N       tokens to generate per sequence (default 32); the first comes\n"
    "                           from the prefill's logits\n"
    "  --greedy                 pick the most likely token (the default)\n"
    "  --top-k K                sample among the K most likely tokens (0: all)\n"
    "  --top-p P                sample among the most likely tokens whose probability sums\n"
    "                           to P (nucleus; 1: all)\n"
    "  --temperature T          divide the logits by T before sampling (default 1)\n"
    "  --seed S                 the sampler's seed (default 0; same seed, same tokens)\n"
    "  --stop-id ID             a sequence ends after generating ID (repeatable); the run\n"
    "                           stops when every sequence has ended\n"
    "  --logits-out FILE.npy    write every step's logits, f32 [steps, batch, vocab]\n"
    "  --json                   print one JSON object: tokens (the generated ids: a list for\n"
    "                           one sequence, a list of lists for several), ttft_ms,\n"
    "                           decode_tokens_per_s, decode_steps, cache_bytes (the paged\n"
    "                           cache's blocks in use), block_size, blocks_in_use,\n"
    "                           cache_blocks (the pool), capacity, max_context,\n"
    "                           peak_rss_mb (getrusage), rss_growth_mb (the\n"
    "                           resident set at the end minus after the first decode step;\n"
    "                           --logits-out adds its own buffer)\n"
    "  --warmup N               before the timed generation, N untimed ones of two tokens\n"
    "                           (a prefill and a decode step: first-use costs out of the\n"
    "                           figures; default 0)\n"
    "%s";

struct Sampler {
  bool greedy = true;
  int64_t top_k = 0;
  double top_p = 1.0, temperature = 1.0;
  std::mt19937_64 rng{0};

  int64_t Pick(const float* logits, int64_t vocab) {
    if (greedy) return std::max_element(logits, logits + vocab) - logits;
    std::vector<int64_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
    const int64_t k = top_k > 0 ? std::min(top_k, vocab) : vocab;
    std::vector<double> p(k);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      p[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
      sum += p[i];
    }
    int64_t keep = k;
    double mass = 0;
    for (int64_t i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= top_p) {
        keep = i + 1;
        break;
      }
    }
    std::discrete_distribution<int64_t> pick(p.begin(), p.begin() + keep);
    return order[pick(rng)];
  }
};

absl::Status ParsePrompt(const std::string& v, std::vector<std::vector<int64_t>>* prompts) {
  if (absl::EndsWith(v, ".npy")) {
    absl::StatusOr<Tensor> t = ReadNpy(v);
    if (!t.ok()) return t.status();
    if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-ids ", v, ": token ids must be int64 or int32"));
    if (t->rank() != 1 && t->rank() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-ids ", v, ": want [n] or [batch, n] token ids"));
    const int64_t rows = t->rank() == 1 ? 1 : t->dims()[0], n = t->dims().back();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> p(n);
      for (int64_t j = 0; j < n; ++j)
        p[j] = t->dtype() == DType::kI64 ? t->data<int64_t>()[r * n + j]
                                         : t->data<int32_t>()[r * n + j];
      prompts->push_back(std::move(p));
    }
    return absl::OkStatus();
  }
  std::vector<int64_t> p;
  for (absl::string_view part : absl::StrSplit(v, ',')) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id))
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: '", std::string(part), "' is not a token id (want 1,2,3 or FILE.npy)"));
    p.push_back(id);
  }
  prompts->push_back(std::move(p));
  return absl::OkStatus();
}

// The resident set now (/proc/self/statm), in MiB; 0 when unreadable.
double ResidentMiB() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * ::sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0) : 0;
}

template <typename T>
absl::Status ParseNumber(const std::string& flag, const std::string& v, T* out) {
  bool ok;
  if constexpr (std::is_floating_point_v<T>)
    ok = absl::SimpleAtod(v, out);
  else
    ok = absl::SimpleAtoi(v, out);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat(flag, ": '", v, "' is not a number"));
  return absl::OkStatus();
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string plan_path, v, logits_out;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> stop_ids;
  int64_t max_new = 32, warmup = 0;
  Sampler sampler;
  bool json = false, sampled = false, greedy_flag = false;
  ExecutorOptions eo;
  bool executor_given = false;
  while (!args.Done()) {
    absl::Status error;
    if (args.Flag("--help") || args.Flag("-h")) {
      std::printf(kHelp, kExecutorFlagsHelp);
      return kExitOk;
    }
    if (ParseExecutorFlag(args, &eo, &error, &executor_given)) {
      if (!error.ok()) return Fail(error);
      continue;
    }
    if (args.Flag("--json")) {
      json = true;
      continue;
    }
    if (args.Flag("--greedy")) {
      greedy_flag = true;
      continue;
    }
    if (args.Option("--prompt-ids", &v)) {
      if (absl::Status s = ParsePrompt(v, &prompts); !s.ok()) return Fail(s);
      continue;
    }
    if (args.Option("--max-new-tokens", &v)) {
      if (absl::Status s = ParseNumber("--max-new-tokens", v, &max_new); !s.ok()) return Fail(s);
      continue;
    }
    if (args.Option("--warmup", &v)) {
      if (absl::Status s = ParseNumber("--warmup", v, &warmup); !s.ok()) return Fail(s);
      continue;
    }
    if (args.Option("--top-k", &v)) {
      if (absl::Status s = ParseNumber("--top-k", v, &sampler.top_k); !s.ok()) return Fail(s);
      sampled = true;
      continue;
    }
    if (args.Option("--top-p", &v)) {
      if (absl::Status s = ParseNumber("--top-p", v, &sampler.top_p); !s.ok()) return Fail(s);
      sampled = true;
      continue;
    }
    if (args.Option("--temperature", &v)) {
      if (absl::Status s = ParseNumber("--temperature", v, &sampler.temperature); !s.ok())
        return Fail(s);
      sampled = true;
      continue;
    }
    if (args.Option("--seed", &v)) {
      uint64_t seed = 0;
      if (absl::Status s = ParseNumber("--seed", v, &seed); !s.ok()) return Fail(s);
      sampler.rng.seed(seed);
      continue;
    }
    if (args.Option("--stop-id", &v)) {
      int64_t id = 0;
      if (absl::Status s = ParseNumber("--stop-id", v, &id); !s.ok()) return Fail(s);
      stop_ids.push_back(id);
      continue;
    }
    if (args.Option("--logits-out", &v)) {
      logits_out = v;
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (plan_path.empty() && args.Positional(&plan_path)) continue;
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "generate: unexpected argument '", args.Next(), "' (see kiln generate --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (plan_path.empty())
    return Fail(absl::InvalidArgumentError("generate: no plan given (see kiln generate --help)"));
  if (prompts.empty())
    return Fail(absl::InvalidArgumentError("generate: no prompt given: --prompt-ids 1,2,3"));
  if (max_new < 1) return Fail(absl::InvalidArgumentError("--max-new-tokens must be at least 1"));
  if (greedy_flag && sampled)
    return Fail(absl::InvalidArgumentError(
        "--greedy picks the most likely token; it does not combine with --top-k, --top-p or "
        "--temperature"));
  if (warmup < 0) return Fail(absl::InvalidArgumentError("--warmup must be >= 0"));
  if (sampler.top_k < 0) return Fail(absl::InvalidArgumentError("--top-k must be >= 0"));
  if (!(sampler.top_p > 0 && sampler.top_p <= 1))
    return Fail(absl::InvalidArgumentError("--top-p must be in (0, 1]"));
  if (!(sampler.temperature > 0 && std::isfinite(sampler.temperature)))
    return Fail(absl::InvalidArgumentError("--temperature must be > 0"));
  sampler.greedy = !sampled;

  absl::StatusOr<LoadedPlan> loaded = LoadPlanAndExecutor(plan_path, eo);
  if (!loaded.ok()) return Fail(loaded.status());
  std::shared_ptr<const Executor> executor = std::move(loaded->executor);
  absl::StatusOr<std::unique_ptr<GenerationSession>> session = GenerationSession::Create(executor);
  if (!session.ok()) return Fail(NamePlan(session.status(), plan_path));
  GenerationSession& gen = **session;

  using Clock = std::chrono::steady_clock;
  const int64_t nb = static_cast<int64_t>(prompts.size());
  for (int64_t w = 0; w < warmup; ++w) {  // a prefill leaves a slot for a decode step
    absl::StatusOr<Tensor> first = gen.Prefill(prompts);
    if (!first.ok()) return Fail(first.status());
    const std::vector<int64_t> zeros(nb, 0);
    if (absl::StatusOr<Tensor> d = gen.Decode(zeros); !d.ok()) return Fail(d.status());
  }
  std::vector<std::vector<int64_t>> tokens(nb);
  std::vector<bool> ended(nb, false);
  std::vector<float> all_logits;
  std::vector<int64_t> next(nb);
  auto choose = [&](const Tensor& logits) {
    const int64_t vocab = logits.dims()[1];
    if (!logits_out.empty())
      all_logits.insert(all_logits.end(), logits.data<float>(), logits.data<float>() + nb * vocab);
    bool all_ended = true;
    for (int64_t b = 0; b < nb; ++b) {
      next[b] = sampler.Pick(logits.data<float>() + b * vocab, vocab);
      if (!ended[b]) {
        tokens[b].push_back(next[b]);
        ended[b] = std::count(stop_ids.begin(), stop_ids.end(), next[b]) > 0;
      }
      all_ended = all_ended && ended[b];
    }
    return all_ended;
  };
  const auto t0 = Clock::now();
  absl::StatusOr<Tensor> logits = gen.Prefill(prompts);
  if (!logits.ok()) return Fail(logits.status());
  bool done = choose(*logits);
  const double ttft = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto t1 = Clock::now();
  int64_t steps = 0;
  double rss_first_step = 0;
  for (int64_t i = 1; i < max_new && !done; ++i) {
    logits = gen.Decode(next);
    if (!logits.ok()) return Fail(logits.status());
    done = choose(*logits);
    if (++steps == 1) rss_first_step = ResidentMiB();
  }
  const double rss_growth = steps > 0 ? ResidentMiB() - rss_first_step : 0;
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const double peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
  const double decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
  const double tps = steps > 0 && decode_s > 0 ? static_cast<double>(steps * nb) / decode_s : 0;
  if (!logits_out.empty()) {
    const int64_t vocab = gen.vocab();
    const int64_t rows = static_cast<int64_t>(all_logits.size()) / (nb * vocab);
    Tensor t = Tensor::FromF32({rows, nb, vocab}, all_logits);
    if (absl::Status s = WriteNpy(logits_out, t); !s.ok()) return Fail(s);
  }
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("tokens");
    auto ids = [&](const std::vector<int64_t>& t) {
      w.BeginArray();
      for (int64_t id : t) w.Int(id);
      w.EndArray();
    };
    if (nb == 1) {
      ids(tokens[0]);
    } else {
      w.BeginArray();
      for (const auto& t : tokens) ids(t);
      w.EndArray();
    }
    w.Key("ttft_ms").Double(ttft * 1e3);
    w.Key("decode_tokens_per_s").Double(tps);
    w.Key("decode_steps").Int(steps);
    w.Key("cache_bytes").Int(gen.cache_bytes());
    w.Key("block_size").Int(gen.block_size());
    w.Key("blocks_in_use").Int(gen.blocks_in_use());
    w.Key("cache_blocks").Int(gen.cache_blocks());
    w.Key("capacity").Int(gen.capacity());
    w.Key("max_context").Int(gen.max_context());
    w.Key("peak_rss_mb").Double(peak_rss_mb);
    w.Key("rss_growth_mb").Double(rss_growth);
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  for (int64_t b = 0; b < nb; ++b)
    std::printf("sequence %lld (prompt %zu tokens): %s\n", static_cast<long long>(b),
                prompts[b].size(), absl::StrJoin(tokens[b], ",").c_str());
  std::printf("time to first token %.2f ms; decode %.1f tokens/s (%lld steps x %lld sequences)\n",
              ttft * 1e3, tps, static_cast<long long>(steps), static_cast<long long>(nb));
  std::printf(
      "cache %.2f MiB in %lld of %lld blocks of %lld slots (capacity %lld of %lld slots per "
      "sequence); peak RSS %.1f MiB\n",
      static_cast<double>(gen.cache_bytes()) / (1024.0 * 1024.0),
      static_cast<long long>(gen.blocks_in_use()), static_cast<long long>(gen.cache_blocks()),
      static_cast<long long>(gen.block_size()), static_cast<long long>(gen.capacity()),
      static_cast<long long>(gen.max_context()), peak_rss_mb);
  return kExitOk;
}

}  // namespace kiln::cli
