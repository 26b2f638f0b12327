"""The data of a turn, which the nodes and the graph's wiring both use: the checkpointed state
(``state``), the ``messages`` channel stored as deltas (``history``), and who the turn runs for
(``context``). Plain modules: importing them imports neither the nodes nor the wiring."""
