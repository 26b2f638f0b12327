"""The logic of one round of a turn, shared by the graph's nodes, the ``create_agent``
middleware and ``Agent``: what the model is shown (``tools``), how its reply and arguments are
checked (``model_reply``, ``checks``), how answers become tool messages (``messages``), held
writes and the decisions on them (``held``, ``decisions``, ``hitl``), and recovery of an
interrupted round (``recovery``). Who the turn runs for: ``context``, ``server_user``, ``bound``.

No LangGraph import here (LangChain's message types are used): the nodes bring LangGraph.
"""
