#!/usr/bin/env python3
"""Exports tiny image towers of multimodal retrievers through torch.onnx as kiln fixtures.

Why: the image side of CLIP-style retrievers (and plain ViT encoders) starts with a
patch-embedding Conv and carries the vision ops kiln's text models never use. These
fixtures are what the exporters really write: transformers' CLIPVisionModel (quick-GELU,
pre-LayerNorm, class embedding, post-LayerNorm pooler) and ViTModel (GELU, pooler
dense + tanh), built from small configs with seeded random weights (no hub download),
exported by torch.onnx's TorchScript exporter (dynamo=False, opset 14) and its dynamo
exporter (dynamo=True, its default opset), eager attention. tests/e2e/test_vision.py
compares kiln with onnxruntime on them.

Each fixture is checked here with onnx.checker (full check) and by running it in
onnxruntime against torch's own output (max abs error <= 1e-4) on batch 2 and 1.

Sizes: 32x32 RGB images, 8x8 patches (16 patches + the class token), hidden 32, 4 heads,
2 layers, FFN 64. Every file stays under 250 KB. Outputs are meaningless; the graph
structure is the point.

Limits: needs torch, transformers, onnx, onnxscript and onnxruntime (the versions of
models/fixtures/torch/README.md); CI does not run this script, it only runs the committed
files. random_pixels (numpy only) is what the tests import.

Usage:
  /opt/torchenv/bin/python models/export_vision.py            # all fixtures
  /opt/torchenv/bin/python models/export_vision.py --out /tmp/x
"""

import argparse
import os
import sys

import numpy as np

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "vision")
FAMILIES = {"clip": ("last_hidden_state", "pooler_output"),
            "vit": ("last_hidden_state", "pooler_output")}
EXPORTERS = ("torchscript", "dynamo")
TORCHSCRIPT_OPSET = 14
IMAGE, PATCH, CHANNELS = 32, 8, 3
HIDDEN, HEADS, LAYERS, FFN = 32, 4, 2, 64
INIT_STD = 0.1  # peaked attention, as in export_torch.py
TOLERANCE = 1e-4
SEED = 0


def fixture_name(family, exporter):
    return f"{family}_{exporter}.onnx"


def random_pixels(batch, seed=0):
    """Seeded float32 [batch, 3, 32, 32] images, roughly normalized (N(0, 1))."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, CHANNELS, IMAGE, IMAGE), dtype=np.float32)


def build_model(family):
    """The transformers vision model of `family`, seeded random weights, eval mode."""
    import torch
    import transformers as tf

    torch.manual_seed(SEED)
    if family == "clip":
        config = tf.CLIPVisionConfig(hidden_size=HIDDEN, intermediate_size=FFN,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     num_channels=CHANNELS, image_size=IMAGE,
                                     patch_size=PATCH, initializer_range=INIT_STD,
                                     attn_implementation="eager")
        model = tf.CLIPVisionModel(config)
    else:
        config = tf.ViTConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                              num_attention_heads=HEADS, intermediate_size=FFN,
                              image_size=IMAGE, patch_size=PATCH, num_channels=CHANNELS,
                              initializer_range=INIT_STD, attn_implementation="eager")
        model = tf.ViTModel(config, add_pooling_layer=True)
    return model.eval()


def make_wrapper(model):
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    return Wrapper().eval()


def export_one(family, exporter, path):
    import torch

    wrapper = make_wrapper(build_model(family))
    pixels = torch.from_numpy(random_pixels(2, SEED))
    names = list(FAMILIES[family])
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(wrapper, (pixels,), path, dynamo=False,
                              opset_version=TORCHSCRIPT_OPSET, input_names=["pixel_values"],
                              output_names=names,
                              dynamic_axes={"pixel_values": {0: "batch"},
                                            names[0]: {0: "batch"}, names[1]: {0: "batch"}},
                              do_constant_folding=True)
        else:
            batch = torch.export.Dim("batch", min=1, max=64)
            program = torch.onnx.export(wrapper, (pixels,), dynamo=True,
                                        input_names=["pixel_values"], output_names=names,
                                        dynamic_shapes={"pixel_values": {0: batch}})
            program.save(path)
    return wrapper


def verify(wrapper, path):
    import onnx
    import onnxruntime as ort
    import torch

    onnx.checker.check_model(path, full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for batch in (2, 1):
        pixels = random_pixels(batch, seed=batch)
        with torch.no_grad():
            want = [t.numpy() for t in wrapper(torch.from_numpy(pixels))]
        got = session.run(None, {"pixel_values": pixels})
        for w, g in zip(want, got):
            worst = max(worst, float(np.abs(w - g).max()))
    if worst > TOLERANCE:
        raise RuntimeError(f"{path}: onnxruntime differs from torch by {worst}")
    return worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=FIXTURE_DIR, help="output folder")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for family in FAMILIES:
        for exporter in EXPORTERS:
            path = os.path.join(args.out, fixture_name(family, exporter))
            try:
                wrapper = export_one(family, exporter, path)
                worst = verify(wrapper, path)
                print(f"wrote {path} ({os.path.getsize(path)} bytes), max |onnxruntime - "
                      f"torch| = {worst:.2e}")
            except Exception as e:  # report every fixture, then fail
                failed += 1
                print(f"FAILED {path}: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
