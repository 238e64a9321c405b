"""The measuring bench: workers by restart group (:mod:`.pool`), the one way blocks are alternated across them
(:mod:`.interleave`), what a block recorded (:mod:`.record`), how many blocks a comparison plans (:mod:`.plan`) and
when it may stop (:mod:`.deciders`), and the A/B runner over them all (:mod:`.ab`). The live view's verification,
compare, tune's racer, capacity and variants are its clients."""
