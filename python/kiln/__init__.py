"""kiln: an ahead-of-time compiler for ONNX Transformer models, from Python.

    import kiln
    plan = kiln.compile("model.onnx", "model.kiln",
                        profile={"batch": [1, 8], "sequence": [32, 128]})
    with plan.session(threads=2) as session:
        outputs = session.run({"input_ids": ids, "attention_mask": mask})

`compile` turns a model into a `Plan` (optionally written to a .kiln file, which
`Plan.load` maps back); `Plan.session` makes a `Session` whose `run` takes and returns
numpy arrays (or any DLPack tensor) without copying them. `Encoder` and `Reranker`
(kiln.rag; they need the `tokenizers` package) embed texts and re-rank passages on top.
Errors are `kiln.Error` subclasses carrying kiln's message (see kiln._errors).
docs/python.md has the whole guide.
"""

import os
import sys
from typing import Callable, Mapping, Optional, Sequence, Union

from ._errors import (AccuracyError, DataLoss, Error, FailedPrecondition, Internal,
                      InvalidArgument, NotFound, PermissionDenied, ResourceExhausted, Unsupported)
from ._kiln import Generator, Plan, Session, __version__, cuda_device
from ._kiln import _compile

PathLike = Union[str, os.PathLike]

__all__ = [
    "compile", "Plan", "Session", "Generator", "Encoder", "Reranker", "cuda_device", "__version__",
    "Error", "InvalidArgument", "NotFound", "Unsupported", "FailedPrecondition", "DataLoss",
    "AccuracyError",
    "PermissionDenied", "ResourceExhausted", "Internal",
]


def _int_list(name, key, values):
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name}[{key!r}] must be a list of ints, got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}[{key!r}] must be a list of ints, got {v!r}")
        out.append(int(v))
    return out


def _mapping(name, value, convert):
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be str, got {key!r}")
        out[key] = convert(name, key, v)
    return out


def _int(name, key, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}[{key!r}] must be an int, got {v!r}")
    return int(v)


def _count(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError(f"{name} must be an int >= 0 (0: kiln's default), got {v!r}")
    return int(v)


def compile(model: PathLike, output: Optional[PathLike] = None, *,
            profile: Optional[Mapping[str, Sequence[int]]] = None,
            shapes: Optional[Mapping[str, Sequence[int]]] = None,
            symbols: Optional[Mapping[str, int]] = None,
            precision: str = "fp32", head_precision: Optional[str] = None,
            target: str = "cpu", opt_level: int = 2,
            cuda_sms: Optional[Sequence[int]] = None, allow_tf32: bool = False,
            disabled_passes: Optional[Sequence[str]] = None,
            decode_context: Optional[Sequence[int]] = None,
            kv_block_size: int = 0, kv_cache_blocks: int = 0,
            prefill_logits: str = "last",
            progress: Union[bool, Callable[[str], None]] = False,
            accept: Optional[str] = None, calib: Optional[PathLike] = None,
            int8_activations: str = "dynamic", observer: str = "percentile",
            percentile: float = 99.99) -> Plan:
    """Compiles an ONNX model into a Plan, as `kiln compile` does.

    model: the .onnx file (its external data beside it is mapped, not read).
    output: also write the plan there (streamed: peak memory stays near the weights' size)
        and return it loaded from that file; None keeps the plan in memory (`Plan.save`).
    profile: shape buckets, {symbol: [values]}: one bucket per combination, e.g.
        {"batch": [1, 8, 32], "sequence": [32, 128]}. A run picks the smallest bucket that
        fits and pads batch/sequence up to it.
    shapes: one static shape per input, {input name: dims}; symbols: {symbol: value}.
        Every symbolic dim must be bound by profile, shapes or symbols.
    precision: "fp32" (default); "bf16" or "int8" on cpu (the GEMMs' weights and inputs in
        bf16, or s8 weights per output channel with inputs quantized per row; everything else
        fp32), or "auto" (int8, then int8 with the attention GEMMs in bf16, then bf16, then
        fp32: the first that meets its accuracy gate); "fp16", "bf16" or "int8" on cuda
        (int8: the GEMMs on cuBLASLt's int8 tensor cores, the rest fp16; docs/precision.md).
    head_precision: cpu int8/bf16/auto plans: the output heads' GEMMs (an LM head, a
        classifier) at "int8", "bf16" or "fp32"; None: fp32 (as `kiln compile
        --head-precision`).
    target: "cpu" (default) or "cuda".
    opt_level: 0..3 as `kiln opt -O<n>` (default 2, every fusion).
    cuda_sms: cuda plans: the SM architectures, e.g. [90] (default 80 and 90).
    allow_tf32: cuda fp32 plans: let GEMMs use TF32 tensor cores.
    disabled_passes: pass names to skip (`kiln passes` lists them).
    decode_context: KV-cache decoders: the cache capacities, e.g. [256, 1024]; the plan gets
        a prefill and a decode program and runs through `plan.generator()`
        (docs/generation.md); on cuda the cache lives in the GPU's memory (device 0).
    kv_block_size, kv_cache_blocks: the decode program's paged cache: slots per block (0:
        the largest power of two <= 128 dividing every capacity) and blocks per K/V pool (0:
        largest batch x largest capacity / block size, + 1 scratch block), as
        `kiln compile --kv-block-size/--kv-cache-blocks`.
    prefill_logits: generation plans: "last" (default: the prefill's `logits` output is
        [batch, 1, vocab], each sequence's last token, and the LM head runs on that row
        only) or "all" ([batch, sequence, vocab] as exported), as `kiln compile
        --prefill-logits`.
    progress: True prints one line per compile phase to stderr; a callable receives them.
    accept: cpu plans below fp32: the accuracy gate, checked after compiling by running the
        plan beside the model's fp32 plan, e.g. "cosine>=0.999,logits:rank_agreement>=0.99"
        (as `kiln compile --accept`; "none": no gate). Default: bf16 "cosine>=0.9999", int8
        "cosine>=0.99". Not met: kiln.AccuracyError, and nothing is written to `output`.
    calib: the gate's input sets, a folder of .npz files / sub-folders of .npy files (as
        `kiln verify --calib`), also int8's calibration; default: seeded random valid inputs.
    int8_activations: int8 plans: "dynamic" (default: each row quantized at run time with
        its own range) or "static" (one range per GEMM input from the calibration sets,
        chosen by `observer`: "percentile" of |x| at `percentile` (default 99.99),
        "minmax" or "entropy"), as `kiln compile --int8-activations/--observer/--percentile`.

    Raises kiln.InvalidArgument / kiln.Unsupported / kiln.NotFound naming the ONNX node,
    op and opset (or the option) that is wrong, kiln.AccuracyError for a gate not met.
    """
    if progress is True:
        def progress(line):  # noqa: F811  (the flag becomes the printer)
            print(line, file=sys.stderr, flush=True)
    elif progress is False or progress is None:
        progress = None
    elif not callable(progress):
        raise TypeError(f"progress must be a bool or a callable, got {type(progress).__name__}")
    for name, value in (("precision", precision), ("target", target),
                        ("int8_activations", int8_activations), ("observer", observer),
                        ("prefill_logits", prefill_logits),
                        ("head_precision", "" if head_precision is None else head_precision)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"opt_level must be an int, got {opt_level!r}")
    return _compile(
        os.fspath(model), None if output is None else os.fspath(output),
        _mapping("profile", profile, _int_list), _mapping("shapes", shapes, _int_list),
        _mapping("symbols", symbols, _int), precision, target, opt_level,
        _int_list("cuda_sms", "", cuda_sms or []), bool(allow_tf32),
        [str(p) for p in (disabled_passes or [])],
        _int_list("decode_context", "", decode_context or []),
        _count("kv_block_size", kv_block_size), _count("kv_cache_blocks", kv_cache_blocks),
        progress,
        None if accept is None else str(accept), "" if calib is None else os.fspath(calib),
        int8_activations, observer, float(percentile), prefill_logits,
        "" if head_precision is None else head_precision)


def __getattr__(name):
    # The RAG layer imports `tokenizers` only when it is used.
    if name in ("Encoder", "Reranker"):
        from . import rag
        return getattr(rag, name)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
