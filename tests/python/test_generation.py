"""kiln.Generator (plan.generator(), a plan compiled with decode_context): greedy generation
from Python gives the tokens and logits of `kiln generate` on the same plan (the CLI's own
onnxruntime comparison is tests/e2e/test_generation.py), restart/fork/lengths behave as
the C++ session's, and bad inputs raise kiln's error classes with kiln's message.
Tolerance: exact — the same executor code on the same inputs."""

import json
import subprocess

import numpy as np
import pytest

import kiln

KV = "models/fixtures/kv/llama_kv_dynamo_sdpa.onnx"


@pytest.fixture(scope="module")
def plan_path(source_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "llama.kiln"
    kiln.compile(source_dir / KV, path, profile={"batch": [1, 2], "sequence": [8]},
                 decode_context=[32])
    return path


def test_greedy_matches_the_cli(kiln_bin, plan_path, tmp_path):
    gen = kiln.Plan.load(plan_path).generator(threads=1)
    logits = gen.prefill([[5, 17, 42]])
    tokens, rows = [], [logits]
    for _ in range(7):
        tokens.append(int(np.argmax(logits[0])))
        logits = gen.decode([tokens[-1]])
        rows.append(logits)
    tokens.append(int(np.argmax(logits[0])))
    out = tmp_path / "logits.npy"
    proc = subprocess.run([kiln_bin, "generate", str(plan_path), "--prompt-ids", "5,17,42",
                           "--max-new-tokens", "8", "--json", "--threads", "1",
                           "--logits-out", str(out)],
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["tokens"] == tokens
    np.testing.assert_array_equal(np.load(out)[:, 0], np.stack(rows)[:, 0])
    assert gen.lengths == [10] and gen.capacity == 32 and gen.max_context == 32
    # 10 tokens in blocks of 32 slots: one block per pool, 4 pools of [4 heads, 32, 16] f32.
    assert gen.block_size == 32 and gen.blocks_in_use == 1 and gen.cache_blocks == 2
    assert gen.vocab == 256 and gen.cache_bytes == 4 * 4 * 32 * 16 * 4
    assert logits.dtype == np.float32 and logits.shape == (1, 256)


def test_restart_and_fork(plan_path):
    gen = kiln.Plan.load(plan_path).generator()
    gen.prefill([[1, 2, 3], [4, 5]])
    gen.decode([7, 8])
    assert gen.lengths == [4, 3]
    first = gen.restart(1, [9, 9, 9, 9, 9])
    assert first.shape == (1, 256) and gen.lengths == [4, 5]
    gen.fork(0, 1)
    assert gen.lengths == [4, 4] and gen.blocks_in_use == 1  # the fork shares sequence 0's
    both = gen.decode([3, 3])
    np.testing.assert_allclose(both[0], both[1], atol=1e-5)
    assert gen.blocks_in_use == 2  # the shared block, copied when both wrote into it


def test_errors(plan_path, tiny_bert, tmp_path):
    gen = kiln.Plan.load(plan_path).generator()
    with pytest.raises(kiln.FailedPrecondition, match="Decode before Prefill"):
        gen.decode([1])
    with pytest.raises(kiln.InvalidArgument, match="outside the vocabulary"):
        gen.prefill([[1, 999]])
    with pytest.raises(kiln.InvalidArgument, match="maximum context of 32"):
        gen.prefill([list(range(1, 33))])
    gen.prefill([[1]])
    with pytest.raises(kiln.InvalidArgument, match="out of range"):
        gen.fork(0, 3)
    with pytest.raises(kiln.FailedPrecondition, match="no decode program"):
        kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}).generator()
    with pytest.raises(kiln.InvalidArgument, match="needs a KV-cache decoder"):
        kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, decode_context=[16])
    with pytest.raises(TypeError):
        kiln.compile(tiny_bert, decode_context=["16"])
    with pytest.raises(TypeError):
        kiln.compile(tiny_bert, decode_context=[16], kv_block_size="4")


def test_prefill_logits_all_scores_every_prompt_position(source_dir, plan_path):
    """prefill_logits="all" keeps the exported [batch, sequence, vocab] logits; the default
    plan's prefill gives the same last-position row (1e-5: the LM head GEMM sees 1 row
    instead of 8 and may block its sums differently)."""
    full = kiln.compile(source_dir / KV, profile={"batch": [1], "sequence": [8]},
                        decode_context=[32], prefill_logits="all")
    assert [o for o in full.outputs if o["name"] == "logits"][0]["dims"][1] == "sequence"
    last = kiln.Plan.load(plan_path)
    assert [o for o in last.outputs if o["name"] == "logits"][0]["dims"][1] == 1
    want = full.generator().prefill([[5, 17, 42]])
    got = last.generator().prefill([[5, 17, 42]])
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    with pytest.raises(kiln.InvalidArgument, match="give last .the default. or all"):
        kiln.compile(source_dir / KV, profile={"batch": [1], "sequence": [8]},
                     decode_context=[32], prefill_logits="first")
    with pytest.raises(TypeError):
        kiln.compile(source_dir / KV, decode_context=[32], prefill_logits=1)


def test_head_precision(source_dir):
    """head_precision="int8" lowers the LM head of an int8 plan too (its note says so) and
    the plan passes int8's default gate; a bad value or an fp32 plan is refused."""
    plan = kiln.compile(source_dir / KV, profile={"batch": [1], "sequence": [8]},
                        decode_context=[32], precision="int8", head_precision="int8")
    notes = json.dumps(plan.info())
    assert "--head-precision int8: an output head" in notes
    logits = plan.generator().prefill([[5, 17, 42]])
    assert logits.shape == (1, 256) and np.isfinite(logits).all()
    with pytest.raises(kiln.InvalidArgument, match="give int8, bf16 or fp32"):
        kiln.compile(source_dir / KV, profile={"batch": [1], "sequence": [8]},
                     decode_context=[32], precision="int8", head_precision="int4")
    with pytest.raises(kiln.InvalidArgument, match="cpu int8 and bf16 plans"):
        kiln.compile(source_dir / KV, profile={"batch": [1], "sequence": [8]},
                     decode_context=[32], head_precision="int8")
    with pytest.raises(TypeError):
        kiln.compile(source_dir / KV, decode_context=[32], head_precision=8)
