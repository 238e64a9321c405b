"""ortop's terminal UI: the only package that imports Textual; nothing outside it depends on it."""
