"""Every key of the main screen in one table: the bindings, the footer, the help screen and the command palette
are all built from it, so none of them can forget a key the others know.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """One main-screen key: Textual key names (comma-separated), the app action, what the user sees."""

    keys: str
    action: str          # an OrtopApp action name, without "action_"
    label: str           # short, for the footer
    help: str            # one line, for the help screen and the command palette
    display: str = ""    # how the key is written (defaults to the first key name)
    footer: bool = True


MAIN_KEYS: tuple[Key, ...] = (
    Key("question_mark", "help", "help", "this help", "?"),
    Key("s", "settings", "settings", "edit every knob of the profile and apply it"),
    Key("h", "history", "history", "the history of configurations (Enter re-applies a row)"),
    Key("d", "doctor", "doctor", "the doctor: what is wrong with this session, and the profile change that fixes "
        "it (Enter applies it)", footer=False),
    Key("plus,equals_sign", "threads_up", "threads+", "intra-op threads up by one (0 = default counts as the "
        "physical cores)", "+"),
    Key("minus,underscore", "threads_down", "threads-", "intra-op threads down by one", "-"),
    Key("p", "toggle_spinning", "spin", "toggle the intra-op pool's spinning (allow_spinning off / default)"),
    Key("R", "cycle_rate", "rate", "cycle the paced rate: closed loop → 100 Hz → 10 Hz → closed loop"),
    Key("b", "toggle_block_base", "dbb", "toggle dynamic_block_base between unset and 4"),
    Key("v", "verify", "verify", "is the last change real? alternate it with the configuration before it for a "
        "few seconds and show the change with its 95 % interval"),
    Key("space", "toggle_pause", "pause", "pause or resume the measured loop", "space"),
    Key("r", "reset_stats", "reset", "reset the running configuration's statistics and the live series"),
    Key("ctrl+s", "save_profile", "save", "save the running profile as TOML (asks a name)", "^s"),
    Key("o", "open_profile", "open", "open a saved or shipped profile and apply it"),
    Key("e", "export", "export", "export the running settings as Python, C++, C#, perf_test, Olive, env or JSON"),
    Key("q,ctrl+c", "quit", "quit", "quit (the settings are kept for ortop --resume)", "q"),
)

HISTORY_KEYS: tuple[tuple[str, str], ...] = (
    ("enter", "re-apply the selected row's profile"),
    ("v", "verify the selected row against the row before it (interleaved, a few seconds)"),
    ("ctrl+s", "save the selected row's profile"),
    ("e", "export the selected row's profile"),
    ("h / esc", "back to the live view"),
)

SETTINGS_KEYS: tuple[tuple[str, str], ...] = (
    ("tab / shift+tab", "move between fields"),
    ("enter / ctrl+s", "apply (the worker rebuilds; errors show beside their field)"),
    ("esc", "close without applying"),
)
