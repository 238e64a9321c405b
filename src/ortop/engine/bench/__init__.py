"""The measuring bench: workers by restart group (:mod:`.pool`), and the one way blocks are alternated across them
(:mod:`.interleave`). Compare, verify, tune's racer, capacity and variants are its clients."""
