"""Drawing as pure functions, one module per panel: figures in, Rich ``Text`` out, sized to the cells a panel has.

Nothing here imports Textual or reads a clock, so every panel can be tested as a plain string, and the refresh
tick can skip a repaint by comparing two ``Text`` objects. Styles are named ANSI colours (``red``, ``cyan``…)
and attributes only: they survive a 256-colour or 16-colour SSH terminal where truecolor gradients would not.
Numbers, bars, clipping and the state badge every panel shares are in :mod:`ortop.tui.panels._format`.
"""
