"""``bench/concurrency.py``'s rounds: the contenders' order rotates each round, so none always
runs first (right after the collector) or right after the heaviest one."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository: bench/
from bench import concurrency  # noqa: E402


def test_rotated_starts_at_places_in_and_wraps_round():
    assert concurrency.rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert concurrency.rotated(["a", "b", "c"], 1) == ["b", "c", "a"]
    assert concurrency.rotated(["a", "b", "c"], 5) == ["c", "a", "b"]
    assert concurrency.rotated([], 3) == []


def test_over_as_many_rounds_as_contenders_each_runs_once_in_every_place(monkeypatch):
    order: list[str] = []
    names = {}

    def factory(name):
        def make(model):
            raise AssertionError("faked: never built")

        names[make] = name
        return make

    for name in ("shape", "three_steps", "agent_graph"):
        monkeypatch.setattr(concurrency, name, factory(name))
    monkeypatch.setattr(concurrency, "turnkit_graph", factory)
    monkeypatch.setattr(concurrency, "ROUNDS", 5)

    def concurrent_slow(make, turns):
        order.append(names[make])
        return (1.0, 1.0, 0.0)

    monkeypatch.setattr(concurrency, "concurrent_slow", concurrent_slow)
    monkeypatch.setattr(concurrency, "sequential_instant", lambda make, turns: (1.0, 1.0))
    monkeypatch.setattr(concurrency, "longest_step", lambda make: 0.001)

    rows = concurrency.run()

    rounds = [order[at : at + 5] for at in range(0, 25, 5)]
    assert all(sorted(one) == sorted(rounds[0]) for one in rounds)
    for place in range(5):
        assert len({one[place] for one in rounds}) == 5  # every contender once in each place
    assert rows  # the table is still made from the rotated passes
