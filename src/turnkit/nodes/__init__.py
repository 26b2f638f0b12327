"""The six graph nodes, one file each, and the pure pieces of a round (``tools.py``)."""
