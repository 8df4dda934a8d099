"""Text in, vectors and scores out: kiln.Encoder (bi-encoder embeddings) and kiln.Reranker
(cross-encoder relevance scores) over a compiled plan and a Hugging Face tokenizer.

Why: a retrieval pipeline wants `encode(texts)` and `rerank(query, passages)`, not token
ids. This layer tokenizes, sorts the texts by token length so each batch pads little, feeds
exactly the inputs the plan declares with their declared dtypes, pools when the model leaves
that to the caller, and hands results back in input order. This layer pads a batch to its
own longest text and the executor pads it on to its bucket (where a dim is static, or a
symbol the executor does not pad, this layer pads to the plan's exact size itself).

Limits: BERT-style inputs only (input_ids, attention_mask, optional token_type_ids, rank 2);
tokenizers are the `tokenizers` package's (imported on first use, so `import kiln` works
without it); the Reranker reads column 0 of a one-label head.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["Encoder", "Reranker"]

_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
_POOLINGS = ("mean", "cls")
# Plan dtype names (kiln plan-info) -> numpy.
_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
           "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
           "bool": np.bool_}
# sentence-transformers' clamp of the token count and torch F.normalize's eps.
_MEAN_EPS = 1e-9
_NORM_EPS = 1e-12


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError as err:
        raise ImportError("kiln.Encoder and kiln.Reranker need the Hugging Face tokenizers "
                          "package: pip install tokenizers") from err
    return tokenizers


def _load_tokenizer(tokenizer: Any):
    """A private tokenizers.Tokenizer: truncation and padding are reconfigured on it, so a
    caller's Tokenizer is copied, never changed."""
    tokenizers = _import_tokenizers()
    if isinstance(tokenizer, tokenizers.Tokenizer):
        return tokenizers.Tokenizer.from_str(tokenizer.to_str())
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer file {path!r} does not exist "
                                    "(expected a Hugging Face tokenizer.json)")
        try:
            return tokenizers.Tokenizer.from_file(path)
        except Exception as err:  # tokenizers raises bare Exception on a bad file
            raise ValueError(f"{path}: not a Hugging Face tokenizer.json ({err})") from err
    raise TypeError("tokenizer must be a path to a tokenizer.json or a tokenizers.Tokenizer, "
                    f"got {type(tokenizer).__name__}")


def _configured(tokenizer, max_length: int | None, strategy: str = "longest_first"):
    """A copy of `tokenizer` that truncates to `max_length` (None: never) and never pads."""
    tokenizers = _import_tokenizers()
    tok = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    if max_length is None:
        tok.no_truncation()
    else:
        direction = (tok.truncation or {}).get("direction", "right")
        tok.enable_truncation(max_length, strategy=strategy, direction=direction)
    tok.no_padding()
    return tok


def _pad_id(tokenizer) -> int:
    """The id padding uses: the tokenizer's own padding setting, else [PAD], else 0."""
    if tokenizer.padding:
        return int(tokenizer.padding["pad_id"])
    pad = tokenizer.token_to_id("[PAD]")
    return 0 if pad is None else int(pad)


def _load_plan(plan: Any):
    from . import Plan  # at call time: kiln/__init__.py imports this module

    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, (str, os.PathLike)):
        return Plan.load(os.fspath(plan))
    raise TypeError(f"plan must be a kiln.Plan or a path to a .kiln file, "
                    f"got {type(plan).__name__}")


def _numpy_dtype(name: str):
    if name in _DTYPES:
        return np.dtype(_DTYPES[name])
    try:
        return np.dtype(name)
    except TypeError as err:
        raise ValueError(f"plan input dtype {name!r} has no numpy equivalent") from err


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _texts(texts: Any, name: str) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of str, got a single {type(texts).__name__} "
                        "(wrap one text as [text])")
    if not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] is {type(text).__name__}, expected str")
    return items


def _limits(dim: int | str, buckets: list[dict],
            paddable: list[str]) -> tuple[int | None, list[int] | None]:
    """(largest value, exact values) of one input dim. Exact values is None where the
    executor pads the dim to its bucket itself (a paddable symbol), else the values this
    layer must pad to: the static size, or every value the buckets bind the symbol to.
    The largest is None where no bucket binds the symbol."""
    if isinstance(dim, int):
        return dim, [dim]
    values = sorted({b["bindings"][dim] for b in buckets if dim in b.get("bindings", {})})
    if not values:
        return None, None
    return values[-1], None if dim in paddable else values


def _round_up(n: int, exact: list[int] | None) -> int:
    """n, or the smallest of `exact` that holds it."""
    return n if exact is None else next((v for v in exact if v >= n), n)


def _pick_output(outputs: list[dict], requested: str | None, preferred: tuple[str, ...],
                 what: str) -> dict:
    by_name = {o["name"]: o for o in outputs}
    if requested is not None:
        if requested not in by_name:
            raise ValueError(f"{what}: the plan has no output {requested!r} "
                             f"(outputs: {sorted(by_name)})")
        return by_name[requested]
    if len(outputs) == 1:
        return outputs[0]
    for name in preferred:
        if name in by_name:
            return by_name[name]
    raise ValueError(f"{what}: the plan has outputs {sorted(by_name)}; choose one with "
                     "output=")


class _Runner:
    """What Encoder and Reranker share: the plan's inputs and bucket limits, the session and
    the length-sorted batching loop."""

    def __init__(self, plan: Any, threads: int, max_length: int | None, batch_size: int,
                 what: str):
        self.what = what
        self.plan = _load_plan(plan)
        self.info = self.plan.info()
        inputs = {i["name"]: i for i in self.info["inputs"]}
        unknown = sorted(set(inputs) - set(_INPUT_NAMES))
        if unknown:
            raise ValueError(f"{what}: the plan declares inputs {unknown}; only "
                             f"{', '.join(_INPUT_NAMES)} can be fed from a tokenizer")
        for name in _INPUT_NAMES[:2]:
            if name not in inputs:
                raise ValueError(f"{what}: the plan has no {name} input (it has "
                                 f"{sorted(inputs)}); without an attention mask, padding "
                                 "would change the results")
        dims = inputs["input_ids"]["dims"]
        if len(dims) != 2:
            raise ValueError(f"{what}: input_ids must be rank 2 [batch, sequence], the plan "
                             f"declares {dims}")
        self.dtypes = {name: _numpy_dtype(info["dtype"]) for name, info in inputs.items()}
        buckets, paddable = self.info["buckets"], self.info.get("paddable_symbols", [])
        (self.max_batch, self.batch_sizes), (plan_seq, self.seq_lengths) = (
            _limits(dim, buckets, paddable) for dim in dims)
        if max_length is None:
            if plan_seq is None:
                raise ValueError(f"{what}: no bucket binds {dims[1]!r}; pass max_length=")
            max_length = plan_seq
        max_length = _positive_int(max_length, "max_length")
        if plan_seq is not None and max_length > plan_seq:
            raise ValueError(f"max_length={max_length} exceeds the longest sequence the plan "
                             f"covers ({plan_seq}); compile with a larger sequence profile")
        self.max_length = max_length
        self.batch_size = _positive_int(batch_size, "batch_size")
        self.session = self.plan.session(threads=threads)

    def batches(self, encodings: list, output: str, pad_id: int,
                batch_size: int | None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yields (rows, output, attention_mask) per batch, longest texts first: `rows` are
        the encodings' indices, `output` the plan output's rows for them, `attention_mask`
        what was fed [len(rows), fed length]."""
        size = self.batch_size if batch_size is None else _positive_int(batch_size,
                                                                         "batch_size")
        if self.max_batch is not None:
            size = min(size, self.max_batch)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), size):
            rows = order[start:start + size]
            yield rows, *self._run([encodings[i] for i in rows], output, pad_id)

    def _run(self, batch: list, output: str, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(batch)
        length = _round_up(max(len(e.ids) for e in batch), self.seq_lengths)
        rows = _round_up(n, self.batch_sizes)
        ids = np.full((rows, length), pad_id, np.int64)
        mask = np.zeros((rows, length), np.int64)
        types = np.zeros((rows, length), np.int64)
        for r, e in enumerate(batch):
            k = len(e.ids)
            ids[r, :k], mask[r, :k], types[r, :k] = e.ids, e.attention_mask, e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feeds = {name: np.ascontiguousarray(arrays[name], dtype)
                 for name, dtype in self.dtypes.items()}
        result = np.asarray(self.session.run(feeds)[output])
        if result.ndim == 0 or result.shape[0] < n:
            raise RuntimeError(f"{self.what}: output {output!r} has shape "
                               f"{list(result.shape)} for a batch of {n}")
        return result[:n], mask[:n]

    def close(self) -> None:
        self.session.close()


class _PlanRunner:
    """What Encoder and Reranker expose of their _Runner: the plan, the length limit,
    close() and `with`."""

    _runner: _Runner

    @property
    def plan(self):
        """The kiln.Plan this object runs."""
        return self._runner.plan

    @property
    def max_length(self) -> int:
        """Texts (Encoder) or query/passage pairs (Reranker) are truncated to this many
        tokens, special tokens included."""
        return self._runner.max_length

    def close(self) -> None:
        """Closes the session; later calls raise kiln.FailedPrecondition."""
        self._runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Encoder(_PlanRunner):
    """Sentence embeddings from a compiled bi-encoder plan (e.g. all-MiniLM-L6-v2).

    Args:
      plan: a kiln.Plan or the path of a .kiln file.
      tokenizer: the path of the model's tokenizer.json, or a tokenizers.Tokenizer (copied;
        the caller's keeps its settings).
      threads: session threads, 0 = one per core.
      max_length: truncate texts to this many tokens, special tokens included. Default: the
        longest sequence the plan's buckets cover (or its static sequence length); larger
        values are refused.
      pooling: for a plan whose output is [batch, seq, hidden] (last_hidden_state): "mean"
        (default; over the attention mask) or "cls" (the first token). Must stay None when
        the plan's output is already [batch, D] (a sentence-transformers export that pools
        in the graph).
      normalize: L2-normalize each vector. Default: True when this class pools, False when
        the plan's output is used as is (the model decides, e.g. its own Normalize).
      batch_size: texts per session run; also capped at the plan's largest batch bucket.
      output: the plan output to read; default the only one, else "sentence_embedding",
        else "last_hidden_state".

    encode() sorts texts by token length, runs them in batches padded to each batch's
    longest text (the executor pads further to its bucket), and returns float32 [N, D] in
    input order. An Encoder may be used from several threads at once.
    """

    def __init__(self, plan: Any, tokenizer: Any, *, threads: int = 0,
                 max_length: int | None = None, pooling: str | None = None,
                 normalize: bool | None = None, batch_size: int = 32,
                 output: str | None = None):
        tok = _load_tokenizer(tokenizer)
        self._runner = _Runner(plan, threads, max_length, batch_size, "Encoder")
        out = _pick_output(self._runner.info["outputs"], output,
                           ("sentence_embedding", "last_hidden_state"), "Encoder")
        self.output: str = out["name"]
        rank = len(out["dims"])
        if rank == 2:
            if pooling is not None:
                raise ValueError(f"pooling={pooling!r}: output {self.output!r} is already "
                                 f"pooled ({out['dims']}); leave pooling=None")
            self.pooling: str | None = None
        elif rank == 3:
            pooling = "mean" if pooling is None else pooling
            if pooling not in _POOLINGS:
                raise ValueError(f"pooling must be one of {_POOLINGS}, got {pooling!r}")
            self.pooling = pooling
        else:
            raise ValueError(f"Encoder: output {self.output!r} has dims {out['dims']}; "
                             "expected [batch, D] or [batch, sequence, hidden]")
        if normalize is not None and not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool or None, got {type(normalize).__name__}")
        self.normalize: bool = self.pooling is not None if normalize is None else normalize
        specials = tok.num_special_tokens_to_add(False)
        if self._runner.max_length <= specials:
            raise ValueError(f"max_length={self._runner.max_length} leaves no room for text "
                             f"after the tokenizer's {specials} special tokens")
        self._pad_id = _pad_id(tok)
        self._tokenizer = _configured(tok, self._runner.max_length)
        last = out["dims"][-1]
        self._dimension = last if isinstance(last, int) else None

    @property
    def batch_size(self) -> int:
        """Default texts per session run (capped at the plan's largest batch bucket)."""
        return self._runner.batch_size

    @property
    def dimension(self) -> int:
        """D, the length of each embedding."""
        if self._dimension is None:
            self._dimension = int(self.encode([""]).shape[1])
        return self._dimension

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """Embeds `texts`; returns float32 [len(texts), D], row i for texts[i].

        batch_size overrides the constructor's for this call. An empty list gives [0, D].
        """
        texts = _texts(texts, "texts")
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        result = None
        for rows, out, mask in self._runner.batches(encodings, self.output, self._pad_id,
                                                    batch_size):
            vectors = self._pool(out, mask)
            if result is None:
                result = np.empty((len(texts), vectors.shape[1]), np.float32)
            result[rows] = vectors
        return result

    def _pool(self, out: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.pooling is None:
            vectors = out.astype(np.float64)
        else:
            hidden = out[:, :mask.shape[1]].astype(np.float64)
            if hidden.shape[1] < mask.shape[1]:
                raise RuntimeError(f"Encoder: output {self.output!r} has shape "
                                   f"{list(out.shape)}, shorter than the fed sequence")
            if self.pooling == "cls":
                vectors = hidden[:, 0]
            else:
                weights = mask.astype(np.float64)
                counts = np.maximum(weights.sum(axis=1, keepdims=True), _MEAN_EPS)
                vectors = np.einsum("bsh,bs->bh", hidden, weights) / counts
        if self.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, _NORM_EPS)
        return vectors.astype(np.float32)


class Reranker(_PlanRunner):
    """Relevance scores from a compiled cross-encoder plan (one-label head, e.g.
    ms-marco-MiniLM): each (query, passage) pair is encoded together and scored.

    Args:
      plan: a kiln.Plan or the path of a .kiln file; its output is [batch, 1] logits.
      tokenizer: the path of the model's tokenizer.json, or a tokenizers.Tokenizer (copied).
      threads: session threads, 0 = one per core.
      max_length: pair length in tokens, special tokens included. Default: the longest
        sequence the plan's buckets cover. The passage is truncated first ("only_second");
        a query too long to leave room for any passage token is truncated with it
        ("longest_first").
      batch_size: pairs per session run; also capped at the plan's largest batch bucket.
      output: the plan output to read; default the only one, else "logits".

    Scores are the raw logits (column 0), higher = more relevant.
    """

    def __init__(self, plan: Any, tokenizer: Any, *, threads: int = 0,
                 max_length: int | None = None, batch_size: int = 32,
                 output: str | None = None):
        tok = _load_tokenizer(tokenizer)
        self._runner = _Runner(plan, threads, max_length, batch_size, "Reranker")
        out = _pick_output(self._runner.info["outputs"], output, ("logits",), "Reranker")
        self.output: str = out["name"]
        dims = out["dims"]
        if len(dims) not in (1, 2) or (len(dims) == 2 and isinstance(dims[1], int) and
                                       dims[1] != 1):
            raise ValueError(f"Reranker: output {self.output!r} has dims {dims}; expected "
                             "[batch, 1] (a one-label cross-encoder head)")
        max_length = self._runner.max_length
        self._specials = tok.num_special_tokens_to_add(True)
        if max_length < self._specials + 2:
            raise ValueError(f"max_length={max_length} leaves no room for a query and a "
                             f"passage after the tokenizer's {self._specials} special tokens")
        self._pad_id = _pad_id(tok)
        self._counting = _configured(tok, None)
        self._passage_first = _configured(tok, max_length, "only_second")
        self._longest_first = _configured(tok, max_length, "longest_first")

    def score(self, query: str, passages: list[str],
              batch_size: int | None = None) -> np.ndarray:
        """float32 [len(passages)]: the score of each passage for `query`, in passage order."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        passages = _texts(passages, "passages")
        scores = np.zeros(len(passages), np.float32)
        if not passages:
            return scores
        query_tokens = len(self._counting.encode(query, add_special_tokens=False).ids)
        room = self.max_length - self._specials - query_tokens
        tok = self._passage_first if room >= 1 else self._longest_first
        encodings = tok.encode_batch([(query, p) for p in passages])
        for rows, out, _ in self._runner.batches(encodings, self.output, self._pad_id,
                                                 batch_size):
            scores[rows] = out.reshape(len(rows), -1)[:, 0]
        return scores

    def rerank(self, query: str, passages: list[str], top_k: int | None = None,
               batch_size: int | None = None) -> list[tuple[int, float]]:
        """(passage index, score) pairs, best first; ties keep passage order. top_k: keep
        only the first top_k (None: all)."""
        if top_k is not None:
            if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
                raise TypeError(f"top_k must be an int or None, got {type(top_k).__name__}")
            if top_k < 0:
                raise ValueError(f"top_k must be >= 0, got {top_k}")
        scores = self.score(query, passages, batch_size)
        order = np.argsort(-scores, kind="stable")
        if top_k is not None:
            order = order[:top_k]
        return [(int(i), float(scores[i])) for i in order]
