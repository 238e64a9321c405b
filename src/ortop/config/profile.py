"""Profiles: the one import the other rooms use for what a profile is, how it is read and written, and how it is
checked.

Three modules stand behind it, importing one another one way: :mod:`ortop.config.io` (TOML/JSON in and out) over
:mod:`ortop.config.validate` (the checks) over :mod:`ortop.config.tree` (the frozen dataclasses), with the
dotted-key helpers of :mod:`ortop.config.keys` and the provider names of :mod:`ortop.config.providers` below them
all. This face imports them; none of them imports it (an import-linter contract in pyproject.toml holds the order).

This module imports neither onnxruntime nor textual: profiles can be validated on any host.
"""

from __future__ import annotations

from ortop.config import knobs
from ortop.config.errors import ProfileError, ProfileErrors
from ortop.config.io import from_dict, load, loads, merge, save
from ortop.config.keys import flatten
from ortop.config.knobs import ARENA_STRATEGIES, CONV_ALGO_SEARCH, EXECUTION_MODES, OPT_LEVELS
from ortop.config.providers import ALIASES as PROVIDER_ALIASES
from ortop.config.tree import SECTIONS, Profile, ProviderSettings, SessionSettings, Workload, to_dict
from ortop.config.validate import validate
from ortop.config.values import affinity_string, parse_affinity_string, parse_core_list

__all__ = [
    "ARENA_STRATEGIES", "CONFIG_KEYS", "CONV_ALGO_SEARCH", "CUDA_OPTIONS", "EXECUTION_MODES", "KNOWN_ENV",
    "OPT_LEVELS", "PROVIDER_ALIASES", "SECTIONS", "Profile", "ProfileError", "ProfileErrors", "ProviderSettings",
    "SessionSettings", "Workload", "affinity_string", "flatten", "from_dict", "load", "loads", "merge",
    "parse_affinity_string", "parse_core_list", "save", "to_dict", "validate",
]

# Views of the registry under the names older code imports. Taken at import; ortop's own code asks the registry.
CONFIG_KEYS: dict[str, str] = {k.name: k.ort_name for k in knobs.settings(knobs.CONFIG_ENTRY)
                               if k.table == "session"}
CUDA_OPTIONS: dict[str, type | tuple[str, ...]] = {k.name: k.choices or k.type
                                                   for k in knobs.entries("provider.options", "cuda")}
KNOWN_ENV: tuple[str, ...] = tuple(k.name for k in knobs.entries("env"))
