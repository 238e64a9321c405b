"""``ortop info MODEL``: what a model takes and holds, read from the file (no session is built)."""

from __future__ import annotations

import argparse
import json

EXAMPLES = """examples:
  ortop info model.onnx           inputs, free dims, opsets, op histogram
  ortop info model.onnx --json    the same as one JSON object
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.cli.flags import add_json

    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ortop.model import format_info, load_model

    info = load_model(args.model)
    if args.json:
        print(json.dumps(asdict(info), default=str, indent=2))
    else:
        print(format_info(info))
    return 0
