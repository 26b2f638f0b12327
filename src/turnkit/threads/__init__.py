"""One writer per thread: a run takes the thread's lease (``leases``), its checkpoint writes are
fenced by it (``fenced``), the saves it may defer wait for the round's first write
(``deferred``), the savers batch their statements (``batching``), and ``TurnGraph`` takes and
gives back the lease around each run (``turn_graph``)."""
