"""The six nodes of the turn graph, one thin file each, over ``turnkit.turn``: ``list_tools``,
``call_model``, ``validate_args``, ``await_confirmation``, ``execute``, ``fit_results``; and
the graph's checkpointed state (``state``, with its ``messages`` channel in ``history``)."""
