"""Smoke test of an installed kiln wheel (scripts/wheel_check.sh runs it with the python of
a fresh virtual environment, from outside the source tree): the package imports from the
environment, not from a build folder; it compiles and runs a model; its errors, stubs, docs
and the `kiln` CLI the wheel puts on the environment's PATH work.

Usage: VENV/bin/python wheel_smoke.py MODEL.onnx   (the committed tiny BERT fixture)
Prints one line per check and "N passed, 0 failed"; exits non-zero at the first failure.
"""

import pathlib
import subprocess
import sys
import sysconfig
import tempfile


def main():
    model = pathlib.Path(sys.argv[1]).resolve()
    passed = 0

    def check(what, ok):
        nonlocal passed
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            print(f"{passed} passed, 1 failed")
            sys.exit(1)
        passed += 1

    import numpy as np
    import kiln

    where = pathlib.Path(kiln.__file__).resolve()
    check(f"kiln {kiln.__version__} imports from {where.parent}",
          str(where).startswith(str(pathlib.Path(sys.prefix).resolve())))
    check("the stubs and py.typed are installed",
          where.with_name("_kiln.pyi").exists() and where.with_name("py.typed").exists())
    check("help(kiln.compile) has the docstring", "profile" in (kiln.compile.__doc__ or ""))

    with tempfile.TemporaryDirectory() as tmp:
        plan_path = pathlib.Path(tmp) / "tiny.kiln"
        plan = kiln.compile(model, plan_path, profile={"batch": [1, 4], "sequence": [16]})
        check("kiln.compile writes the plan", plan_path.stat().st_size > 0)
        ids = np.arange(1, 25, dtype=np.int64).reshape(2, 12)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        with kiln.Plan.load(plan_path).session(threads=1) as session:
            out = session.run(feeds)["last_hidden_state"]
        check("Session.run returns [2, 12, 64] finite floats",
              out.shape == (2, 12, 64) and bool(np.isfinite(out).all()))
        try:
            plan.session(threads=1).run({**feeds, "input_ids": ids.astype(np.int32)})
            check("a wrong dtype raises kiln.InvalidArgument", False)
        except kiln.InvalidArgument as err:
            check("a wrong dtype raises kiln.InvalidArgument", "input_ids" in str(err))

        cli = pathlib.Path(sysconfig.get_path("scripts")) / "kiln"
        info = subprocess.run([str(cli), "plan-info", str(plan_path), "--json"],
                              capture_output=True, text=True)
        check(f"the wheel's CLI ({cli}) runs plan-info",
              info.returncode == 0 and '"target":"cpu"' in info.stdout.replace(" ", ""))
    print(f"{passed} passed, 0 failed")


if __name__ == "__main__":
    main()
