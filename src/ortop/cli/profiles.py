"""``ortop profiles list|show|diff|validate`` and ``ortop export``: profiles from the command line.

A profile NAME is a path when one exists, else ``profiles/NAME(.toml)`` in the current directory, else a profile
shipped with ortop. Bad input prints one ``ortop: error: ...`` line on stderr and exits 2; ``validate`` exits 1
when a file fails. Neither onnxruntime nor textual is imported: these commands work on any host.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

import tomli_w

from ortop.config import knobs
from ortop.config import profile as profile_mod
from ortop.config.files import load_profile, resolve_profile, shipped_profiles_dir  # noqa: F401  (re-exported)
from ortop.config.profile import ProfileError, ProfileErrors
from ortop.export import FORMATS, render

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2

PROFILES_DESCRIPTION = (
    "ortop profiles list|show|diff|validate: the profiles in ./profiles and those shipped with ortop, listed, shown "
    "with their defaults filled in, compared knob by knob, or checked. A PROFILE is a path when one exists, else "
    "profiles/PROFILE(.toml) in the current folder, else a profile shipped with ortop.")

EXPORT_DESCRIPTION = (
    "ortop export PROFILE --to FORMAT: a profile written as what builds the same session elsewhere: Python or C++ "
    "or C# code, onnxruntime_perf_test arguments, an Olive JSON, environment variables, or the profile as JSON. "
    "Every string from the profile is escaped for its target; the output goes to stdout, or with -o to FILE.")

PROFILES_EXAMPLES = """examples:
  ortop profiles list                            ./profiles and the shipped ones, each with its first comment line
  ortop profiles show cpu-low-power              effective settings, defaults filled in, and ORT's config entries
  ortop profiles diff cpu-latency cpu-low-power  knob by knob, what the second changes
  ortop profiles validate my.toml --host         check files, and their cores against this machine
"""

EXPORT_EXAMPLES = """examples:
  ortop export cpu-low-power --to perf-test                 an onnxruntime_perf_test command line
  ortop export tuned.toml --to python -o ort_session.py     a Python module with make_session()
  ortop export tuned.toml --to cpp --model /srv/model.onnx  C++ that opens another model path
"""


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _header_line(path: Path) -> str:
    """The first line of a profile's leading '#' comment: what it is for."""
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                stripped = line.strip()
                if not stripped:
                    continue
                if stripped.startswith("#"):
                    text = stripped.lstrip("#").strip()
                    if text:
                        return text
                    continue
                break
    except (OSError, UnicodeDecodeError):
        return ""
    return ""


def _profile_dirs() -> list[tuple[str, Path]]:
    dirs: list[tuple[str, Path]] = []
    local = Path("profiles")
    if local.is_dir():
        dirs.append(("profiles in ./profiles", local))
    shipped = shipped_profiles_dir()
    if shipped is not None and not (local.is_dir() and local.resolve() == shipped.resolve()):
        dirs.append((f"shipped profiles ({shipped})", shipped))
    return dirs


def _unset_notes(prof: profile_mod.Profile) -> list[str]:
    """Comment lines naming the settings the profile leaves unset (TOML has no null, so ``show`` cannot print
    them): the ORT ones keep ORT's own default, an ortop one says what ortop does then. None when all are set."""
    ort: list[str] = []
    ortop: list[str] = []
    for knob in knobs.registry():
        if not knob.optional or knobs.is_entry(knob) or knob.read(prof) is not None:
            continue
        if knob.unset:
            ortop.append(f"{knob.key} ({knob.unset})")
        else:
            ort.append(knob.key)
    out = []
    if ort:
        out += textwrap.wrap("left unset, so ORT's own default applies: " + ", ".join(ort), 116,
                             initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
    if ortop:
        out += textwrap.wrap("left unset, ortop decides: " + ", ".join(ortop), 116,
                             initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
    return out


# ---- subcommands --------------------------------------------------------------------------------------------

def _cmd_list(args: argparse.Namespace) -> int:
    groups = _profile_dirs()
    shown = 0
    for title, folder in groups:
        files = sorted(folder.glob("*.toml"))
        if not files:
            continue
        if shown:
            print()
        print(f"{title}:")
        width = max(len(f.stem) for f in files)
        for f in files:
            try:
                about = _one_line(profile_mod.load(f).description) or _header_line(f) or "(no description)"
            except ProfileError as exc:
                about = f"INVALID: {_one_line(exc)}"
            print(f"  {f.stem:<{width}}  {about}")
            print(f"  {'':<{width}}  {f}")
        shown += 1
    if not shown:
        print("no profiles found (looked in ./profiles and the shipped profiles)")
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    path, prof = load_profile(args.name)
    data = prof.to_dict(full=True)
    print(f"# {path}")
    print("# effective settings, defaults filled in")
    for line in _unset_notes(prof):
        print(line)
    print(tomli_w.dumps(data), end="")
    print()
    print("# ORT session config entries it produces:")
    entries = prof.config_entries()
    if not entries:
        print("#   (none)")
    for k, v in entries.items():
        print(f"#   {k} = {v}")
    print(f"# providers: {', '.join(prof.providers())}")
    for k, v in prof.provider_options().items():
        print(f"#   {prof.provider_name()} {k} = {v}")
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    path_a, a = load_profile(args.a)
    path_b, b = load_profile(args.b)
    print(f"--- {path_a}")
    print(f"+++ {path_b}")
    changes = b.changes_from(a)
    if not changes:
        print("no differences")
    for line in changes:
        print(f"  {line}")
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    failed = 0
    host_cpus = os.cpu_count() if args.host else None
    for name in args.files:
        try:
            prof = profile_mod.load(name)
            if host_cpus is not None:
                profile_mod.validate(prof, path=name, host_cpus=host_cpus)
        except ProfileError as exc:
            failed += 1
            print(f"FAIL {name}")
            errors = exc.errors if isinstance(exc, ProfileErrors) else [exc]
            for e in errors:
                print(f"  {_one_line(e)}")
        else:
            print(f"ok {name}")
    return EXIT_INVALID if failed else EXIT_OK


def prepare_profiles(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="profiles_command", metavar="COMMAND")
    sub.required = True
    s = sub.add_parser("list", help="the profiles in ./profiles and the shipped ones")
    s.set_defaults(func=_cmd_list)
    s = sub.add_parser("show", help="a profile's effective settings, defaults filled in, as TOML")
    s.add_argument("name", metavar="PROFILE", help="a path, or a name in ./profiles or the shipped profiles")
    s.set_defaults(func=_cmd_show)
    s = sub.add_parser("diff", help="knob by knob, what B changes from A")
    s.add_argument("a", metavar="A", help="the profile compared against (a path or a name)")
    s.add_argument("b", metavar="B", help="the profile whose changes are listed (a path or a name)")
    s.set_defaults(func=_cmd_diff)
    s = sub.add_parser("validate", help="check profile files; exit 1 if any fails")
    s.add_argument("files", metavar="FILE", nargs="+", help="profile files (TOML or JSON)")
    s.add_argument("--host", action="store_true",
                   help="also check against this machine (affinity cores that exist here)")
    s.set_defaults(func=_cmd_validate)


def run_profiles(args: argparse.Namespace) -> int:
    return int(args.func(args))


def prepare_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", metavar="PROFILE", help="a path, or a name in ./profiles or the shipped profiles")
    p.add_argument("--to", dest="fmt", required=True, metavar="FORMAT", help="one of: " + ", ".join(FORMATS))
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the export to FILE instead of stdout (atomically; the folder must exist)")
    p.add_argument("--model", metavar="MODEL", help="the model path written into the export (default: the "
                                                    "profile's, or model.onnx)")


def run_export(args: argparse.Namespace) -> int:
    path, prof = load_profile(args.profile)
    text = render(prof, args.fmt, model_path=args.model)
    if args.output:
        from ortop.fsutil import write_text

        write_text(args.output, text, protect=[path] + ([prof.model] if prof.model else []), what="export")
        print(f"wrote {args.output} ({args.fmt})")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def profiles_main(argv: list[str]) -> int:
    """``ortop profiles list|show NAME|diff A B|validate FILE...``; returns the exit code."""
    from ortop.cli.main import main

    return main(["profiles", *argv])


def export_main(argv: list[str]) -> int:
    """``ortop export PROFILE --to FORMAT [-o FILE] [--model PATH]``; returns the exit code."""
    from ortop.cli.main import main

    return main(["export", *argv])
