"""Questions only onnxruntime can answer, asked from a child interpreter: ``python -m ortop.runtime.probe max-ir``.

Rooms that must not import onnxruntime (model inspection) run this instead; it prints one answer on stdout.
"""

from __future__ import annotations

import re
import sys


def max_ir_version() -> int | None:
    """The highest model IR version this onnxruntime loads: it refuses IR 99 with "max supported IR version: N"."""
    try:
        import onnxruntime as ort
        from onnx import helper

        model = helper.make_model(helper.make_graph([], "probe", [], []), ir_version=99)
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # the refusal is the answer
        m = re.search(r"max supported IR version:\s*(\d+)", str(exc))
        return int(m.group(1)) if m else None
    return None


def main(argv: list[str]) -> int:
    if argv != ["max-ir"]:
        print("usage: python -m ortop.runtime.probe max-ir", file=sys.stderr)
        return 2
    answer = max_ir_version()
    if answer is None:
        return 1
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
