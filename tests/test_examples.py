"""``examples/tour.py`` (named in the README) must keep working."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_tour_runs_and_shows_a_held_write_approved_once():
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tour.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "catalogue.set_prices         -> catalogue_set_prices         write" in out
    assert "tool 'catalogue.search_products' ignored" in out
    assert "'status': 'confirmation_required'" in out
    assert "yes  : {'executed': True, 'status': 'ok', 'result': {'updated': 1}}" in out


def test_the_readme_points_to_the_tour():
    assert "examples/tour.py" in (ROOT / "README.md").read_text()
