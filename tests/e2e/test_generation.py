"""KV-cached generation (`kiln compile --decode-context`, `kiln generate`) against
onnxruntime looping the same past-KV export (models/fixtures/kv/, all eight: Llama and
Qwen2, dynamo and torchscript, eager and sdpa) with each step's present.* fed back as the
next step's past_key_values.*: greedy generation of 32 tokens is token-identical, and the
logits of every step (kiln generate --logits-out) are within 1e-4 of onnxruntime's. Two
prompts of different lengths batched give the tokens and logits each gives alone; bad
inputs exit 2 with their message.

Tolerance 1e-4 absolute on logits of magnitude ~1 (the same bound as the fixtures'
`kiln run` comparison, test_torch_fixtures.py): fp32 in both, kiln's fused attention over
the static cache sums in another order than onnxruntime's unfused ops over the growing
past, a few 1e-6 per step. A wrong cache slot, position or mask changes the logits by far
more (test_logits_are_discriminating).
"""

import json
import pathlib
import subprocess

import numpy as np
import pytest

import export_torch  # noqa: E402  (models/ is put on sys.path by conftest)

KV_FIXTURES = sorted(pathlib.Path(export_torch.KV_FIXTURE_DIR).glob("*.onnx"))
TOLERANCE = 1e-4
NEW_TOKENS = 32
CONTEXT = 64
BLOCK = 64  # the default block size for a capacity of 64 (the largest power of two <= 128)
TIMEOUT_S = 300


def ort_session(model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def ort_generate(session, family, prompt, steps, forced=None):
    """Greedy generation with onnxruntime over the past-KV export: a prefill with an empty
    past, then one token per step with present.* fed back as past_key_values.*. `forced`
    (the tokens to feed instead of the argmax) makes it report the logits along another
    run's path. Returns (tokens, logits [steps, vocab])."""
    kv_heads = export_torch.DEC_KV_HEADS[export_torch.KV_DECODERS[family]]
    past_names = [i.name for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    out_names = [o.name for o in session.get_outputs()]
    past = {n: np.zeros((1, kv_heads, 0, export_torch.DEC_HEAD_DIM), np.float32)
            for n in past_names}
    ids = np.asarray([prompt], np.int64)
    tokens, logits = [], []
    length = 0
    for step in range(steps):
        n = ids.shape[1]
        feeds = {"input_ids": ids,
                 "attention_mask": np.ones((1, length + n), np.int64),
                 "position_ids": np.arange(length, length + n, dtype=np.int64)[None, :]}
        feeds.update(past)
        out = dict(zip(out_names, session.run(out_names, feeds)))
        last = out["logits"][0, -1]
        logits.append(last)
        token = int(np.argmax(last)) if forced is None else forced[step]
        tokens.append(token)
        length += n
        past = {n_: out[n_.replace("past_key_values.", "present.")] for n_ in past_names}
        ids = np.asarray([[token]], np.int64)
    return tokens, np.stack(logits)


def family_of(model):
    return model.stem.split("_dynamo")[0].split("_torchscript")[0]


def prompt_for(seed, length):
    return [int(t) for t in np.random.default_rng(seed).integers(2, 256, size=length)]


@pytest.fixture(scope="module")
def plans(kiln_bin, tmp_path_factory):
    """Each fixture compiled once: prefill buckets batch 1, 2 x sequence 8, 16; decode
    buckets batch 1, 2 at 64 slots."""
    out = {}
    root = tmp_path_factory.mktemp("generation")
    for model in KV_FIXTURES:
        plan = root / f"{model.stem}.kiln"
        proc = subprocess.run(
            [kiln_bin, "compile", str(model), "-o", str(plan), "--quiet", "--profile",
             "batch=1:2,sequence=8:16", "--decode-context", str(CONTEXT)],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"compile {model.name} failed:\n{proc.stderr}"
        out[model.stem] = plan
    return out


def generate(kiln_bin, plan, prompts, tmp_path, *extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    logits = tmp_path / "logits.npy"
    args = [kiln_bin, "generate", str(plan), "--json", "--logits-out", str(logits), *extra]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"kiln generate failed ({proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout), np.load(logits)


def test_plan_info_shows_both_programs(kiln_bin, plans):
    proc = subprocess.run([kiln_bin, "plan-info", str(next(iter(plans.values()))), "--json"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    info = json.loads(proc.stdout)
    programs = [b["program"] for b in info["buckets"]]
    assert programs == ["model"] * 4 + ["decode"] * 2, programs
    decode = [b for b in info["buckets"] if b["program"] == "decode"]
    assert all(b["bindings"]["past_sequence"] == CONTEXT for b in decode), decode
    assert all(len(b["in_place"]) == 2 * export_torch.DEC_LAYERS for b in decode), decode
    text = subprocess.run([kiln_bin, "plan-info", str(next(iter(plans.values())))],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    assert f"max context {CONTEXT}" in text, text
    assert f"paged: blocks of {BLOCK} slots" in text, text
    decode_in = [s for s in info["signatures"] if s["program"] == "decode"][0]["inputs"]
    assert decode_in[-1]["name"] == "block_table", decode_in
    assert "prefill logits: each sequence's last token" in text, text
    logits = [o for o in info["outputs"] if o["name"] == "logits"][0]
    assert logits["dims"] == ["batch", 1, 256], logits


def test_prefill_logits_flag(kiln_bin, plans, tmp_path):
    """--prefill-logits all keeps the exported [batch, sequence, vocab] and generates the
    same tokens (logits within 1e-5: the LM head GEMM over 1 row instead of 8); a bad value
    or the flag without --decode-context is exit 2."""
    model = KV_FIXTURES[0]
    plan = tmp_path / "all.kiln"
    base = [kiln_bin, "compile", str(model), "-o", str(plan), "--quiet", "--profile",
            "batch=1:2,sequence=8:16"]
    subprocess.run([*base, "--decode-context", str(CONTEXT), "--prefill-logits", "all"],
                   check=True, timeout=TIMEOUT_S)
    text = subprocess.run([kiln_bin, "plan-info", str(plan)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=True).stdout
    assert "prefill logits: every prompt position" in text, text
    assert "logits f32[batch,sequence,256]" in text, text
    prompt = [[5, 17, 42, 7]]
    got, got_logits = generate(kiln_bin, plans[model.stem], prompt, tmp_path / "last")
    want, want_logits = generate(kiln_bin, plan, prompt, tmp_path / "all")
    assert got["tokens"] == want["tokens"]
    assert float(np.max(np.abs(got_logits - want_logits))) <= 1e-5
    for extra, message in ((["--decode-context", str(CONTEXT), "--prefill-logits", "first"],
                            "give last (the default) or all"),
                           (["--prefill-logits", "all"], "generation plans")):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("model", KV_FIXTURES, ids=[p.stem for p in KV_FIXTURES])
def test_greedy_matches_onnxruntime(kiln_bin, plans, model, tmp_path):
    prompt = prompt_for(7, 5)
    got, logits = generate(kiln_bin, plans[model.stem], [prompt], tmp_path,
                           "--max-new-tokens", str(NEW_TOKENS), "--greedy")
    session = ort_session(model)
    want_tokens, _ = ort_generate(session, family_of(model), prompt, NEW_TOKENS)
    assert got["tokens"] == want_tokens
    assert len(set(want_tokens)) > 1, "the model repeats one token: a weak test"
    _, want_logits = ort_generate(session, family_of(model), prompt, NEW_TOKENS,
                                  forced=got["tokens"])
    assert logits.shape == (NEW_TOKENS, 1, 256)
    worst = float(np.max(np.abs(logits[:, 0] - want_logits)))
    assert worst <= TOLERANCE, f"logits differ by {worst}"
    assert got["decode_steps"] == NEW_TOKENS - 1
    assert got["capacity"] == CONTEXT and got["max_context"] == CONTEXT
    # The paged cache holds the blocks the tokens fill: 5 + 31 = 36 slots, one block of 64.
    kv_heads = export_torch.DEC_KV_HEADS[export_torch.KV_DECODERS[family_of(model)]]
    assert got["block_size"] == BLOCK and got["blocks_in_use"] == 1
    assert got["cache_bytes"] == (2 * export_torch.DEC_LAYERS * kv_heads * 1 * BLOCK *
                                  export_torch.DEC_HEAD_DIM * 4)


def test_logits_are_discriminating(plans):
    """The 1e-4 bound means something: onnxruntime's logits one token apart along the same
    path differ by far more."""
    model = KV_FIXTURES[0]
    session = ort_session(model)
    prompt = prompt_for(7, 5)
    _, logits = ort_generate(session, family_of(model), prompt, 4)
    assert float(np.min(np.max(np.abs(np.diff(logits, axis=0)), axis=1))) > 100 * TOLERANCE
    _, shifted = ort_generate(session, family_of(model), [prompt[0] + 1] + prompt[1:], 1)
    assert float(np.max(np.abs(shifted - logits[:1]))) > 100 * TOLERANCE


@pytest.mark.parametrize("model", KV_FIXTURES[::3], ids=[p.stem for p in KV_FIXTURES[::3]])
def test_batched_lengths_match_alone(kiln_bin, plans, model, tmp_path):
    prompts = [prompt_for(11, 3), prompt_for(12, 11)]
    both, both_logits = generate(kiln_bin, plans[model.stem], prompts, tmp_path / "both",
                                 "--max-new-tokens", "12")
    for b, prompt in enumerate(prompts):
        alone, alone_logits = generate(kiln_bin, plans[model.stem], [prompt],
                                       tmp_path / f"alone{b}", "--max-new-tokens", "12")
        assert both["tokens"][b] == alone["tokens"]
        worst = float(np.max(np.abs(both_logits[:, b] - alone_logits[:, 0])))
        assert worst <= TOLERANCE, f"sequence {b}: logits differ by {worst}"


def test_rss_stays_flat_over_1000_steps(kiln_bin, tmp_path):
    """1000 decode steps in one capacity (no growth): the resident set after the first
    step and at the end differ by less than 1 MiB (a per-token leak of one 1 KiB logits
    row would show 1 MiB)."""
    plan = tmp_path / "long.kiln"
    subprocess.run([kiln_bin, "compile", str(KV_FIXTURES[0]), "-o", str(plan), "--quiet",
                    "--profile", "batch=1,sequence=8", "--decode-context", "1024"],
                   check=True, timeout=TIMEOUT_S)
    proc = subprocess.run([kiln_bin, "generate", str(plan), "--json", "--prompt-ids", "5,6,7",
                           "--max-new-tokens", "1001"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    got = json.loads(proc.stdout)
    assert got["decode_steps"] == 1000 and got["capacity"] == 1024
    # The cache grows by whole blocks as the tokens fill them (pages committed on first
    # write); beyond that, nothing.
    assert got["rss_growth_mb"] < got["cache_bytes"] / 2**20 + 1.0, got
    assert got["block_size"] == 128 and got["blocks_in_use"] == (3 + 1000 + 127) // 128, got


def test_padded_decode_batch_and_a_small_pool(kiln_bin, tmp_path):
    """Three sequences on a plan compiled for batches 1, 2 and 4: every decode step pads the
    batch to 4, and the padding row's cache write lands in the scratch block, so the three
    give exactly the tokens each gives alone. A pool of 5 blocks of 8 slots then runs out
    with the numbers in the message."""
    plan = tmp_path / "b4.kiln"
    subprocess.run([kiln_bin, "compile", str(KV_FIXTURES[0]), "-o", str(plan), "--quiet",
                    "--profile", "batch=1:4,sequence=8:16", "--decode-context", "32",
                    "--kv-block-size", "8"], check=True, timeout=TIMEOUT_S)
    prompts = [prompt_for(21, 3), prompt_for(22, 9), prompt_for(23, 5)]
    three, three_logits = generate(kiln_bin, plan, prompts, tmp_path / "three",
                                   "--max-new-tokens", "16")
    assert three["block_size"] == 8 and three["cache_blocks"] == 4 * 32 // 8
    for b, prompt in enumerate(prompts):
        alone, alone_logits = generate(kiln_bin, plan, [prompt], tmp_path / f"alone{b}",
                                       "--max-new-tokens", "16")
        assert three["tokens"][b] == alone["tokens"]
        assert float(np.max(np.abs(three_logits[:, b] - alone_logits[:, 0]))) <= TOLERANCE
    small = tmp_path / "small.kiln"
    subprocess.run([kiln_bin, "compile", str(KV_FIXTURES[0]), "-o", str(small), "--quiet",
                    "--profile", "batch=1:2,sequence=8", "--decode-context", "32",
                    "--kv-block-size", "8", "--kv-cache-blocks", "6"],
                   check=True, timeout=TIMEOUT_S)
    proc = subprocess.run([kiln_bin, "generate", str(small), "--prompt-ids", "1,2,3,4,5",
                           "--prompt-ids", "6,7,8,9,10", "--max-new-tokens", "20"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Decode needs 2 more cache blocks of 8 slots; 1 of the pool's 5 are free" in \
        proc.stderr, proc.stderr


def test_sampling_is_seeded(kiln_bin, plans, tmp_path):
    plan = next(iter(plans.values()))
    runs = [generate(kiln_bin, plan, [[5, 6, 7]], tmp_path / f"s{i}", "--max-new-tokens", "16",
                     "--top-k", "50", "--top-p", "0.9", "--temperature", "1.5", "--seed",
                     str(seed))[0]["tokens"] for i, seed in enumerate([1, 1, 2])]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


@pytest.mark.parametrize("args,message", [
    (["--prompt-ids", "1,256"], "token id 256 (at 1) is outside the vocabulary [0, 256)"),
    (["--prompt-ids", ",".join(["3"] * CONTEXT)],
     f"a prompt of {CONTEXT} tokens does not fit the plan's maximum context of {CONTEXT}"),
    (["--prompt-ids", ",".join(["3"] * 17)],
     "a prompt of 17 tokens is longer than the plan's prefill buckets (sequence 8, 16"),
    (["--prompt-ids", "1,2", "--max-new-tokens", "70"],
     f"sequence 0 holds {CONTEXT} tokens, the plan's maximum context"),
    (["--prompt-ids", "1,x"], "'x' is not a token id"),
    (["--prompt-ids", "1", "--greedy", "--top-k", "3"], "does not combine"),
    (["--prompt-ids", "1", "--top-p", "0"], "--top-p must be in (0, 1]"),
    ([], "no prompt given"),
], ids=["vocab", "context", "prefill", "exhausted", "syntax", "greedy-and-sampling", "top-p",
        "no-prompt"])
def test_bad_inputs_exit_2(kiln_bin, plans, args, message):
    proc = subprocess.run([kiln_bin, "generate", str(next(iter(plans.values()))), *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr


def test_plan_without_decode_program(kiln_bin, tmp_path):
    plan = tmp_path / "plain.kiln"
    subprocess.run([kiln_bin, "compile", str(KV_FIXTURES[0]), "-o", str(plan), "--quiet",
                    "--shape", "batch=1,sequence=4,past_sequence=0,total_sequence=4"],
                   check=True, timeout=TIMEOUT_S)
    proc = subprocess.run([kiln_bin, "generate", str(plan), "--prompt-ids", "1,2"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 2 and "no decode program" in proc.stderr, proc.stderr
