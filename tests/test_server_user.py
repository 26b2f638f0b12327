"""The caller of a run on LangGraph's server is the user its auth handler signed in, read from the
run's config (``configurable.langgraph_auth_user``, ``runtime.server_info.user``), never from the
run's input; without one, the graph's default caller, else a clear failure."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from turnkit import Caller, CallerError, MissingCallerError
from turnkit.deploy import caller_of_user
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel
from turnkit.turn.server_user import KEY_FIELD  # internal: the field key_user fills


class ProxiedUser:
    """What LangGraph's server hands a node: an object with ``identity`` and item access."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.identity = fields["identity"]

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]


def _key(allow: list[str] | None = None) -> dict[str, Any]:
    return {"id": "key-7", "scopes": ["shop.products:read"], "allow": allow}


def test_a_signed_in_user_is_a_session_caller():
    assert caller_of_user({"identity": "alice"}) == (Caller.session("alice"), "all")
    assert caller_of_user(ProxiedUser(identity="bob")) == (Caller.session("bob"), "all")


def test_a_user_signed_in_with_a_turnkit_key_is_that_key_with_its_scopes_and_allow_list():
    caller, allow = caller_of_user({"identity": "alice", KEY_FIELD: _key(["shop.list_products"])})
    assert caller == Caller.key("key-7", scopes={"shop.products:read"}, user_id="alice")
    assert allow == frozenset({"shop.list_products"})
    assert caller_of_user(ProxiedUser(identity="alice", **{KEY_FIELD: _key()}))[1] == "all"


@pytest.mark.parametrize(
    "user",
    [
        None,
        {"identity": ""},  # the server's unauthenticated user
        {"identity": "alice", "is_authenticated": False},
        {"identity": "langgraph-studio-user", "kind": "StudioUser"},  # langgraph dev's Studio
    ],
)
def test_no_user_an_unauthenticated_one_and_studios_own_user_give_no_caller(user):
    assert caller_of_user(user) is None


@pytest.mark.parametrize(
    ("user", "says"),
    [
        ({"identity": 42}, "no usable identity"),
        ({"identity": "  "}, "no usable identity"),
        ({"identity": "alice", KEY_FIELD: "key-7"}, "turnkit.deploy.key_user"),
        ({"identity": "alice", KEY_FIELD: {"scopes": []}}, "turnkit.deploy.key_user"),
    ],
)
def test_a_user_the_auth_handler_made_wrong_is_refused_not_read_as_someone(user, says):
    with pytest.raises(CallerError, match=says):
        caller_of_user(user)


def _answer_with_tools(messages: list[Any], tools: list[dict[str, Any]]) -> str:
    return "tools: " + ",".join(t["function"]["name"] for t in tools)


def _turn(
    executor: Any, *, user: Any = None, context: Any = None, default: Caller | None = None
) -> str:
    graph = build_turn_graph(executor, ScriptedModel([_answer_with_tools]), default_caller=default)
    if isinstance(user, dict):  # the server hands nodes an object (LangGraph drops a dict)
        user = ProxiedUser(**user)
    configurable = {} if user is None else {"langgraph_auth_user": user}
    result = graph.invoke(
        {"messages": [HumanMessage("what can I do?")]},
        {"configurable": configurable},
        context=context,
    )
    return result["messages"][-1].content


def test_each_signed_in_user_sees_only_their_tools(executor, ledger):
    ledger.set_setting("api_session_write_modules", ["shop"])
    assert _turn(executor, user={"identity": "bob"}) == "tools: shop_list_products"
    assert _turn(executor, user=ProxiedUser(identity="alice")) == (
        "tools: shop_list_products,shop_set_prices,shop_delete_product"
    )


def test_the_signed_in_user_wins_over_the_default_caller(executor):
    default = Caller.session("alice")
    assert _turn(executor, user={"identity": "carol"}, default=default) == "tools: "
    assert _turn(executor, default=default) == "tools: shop_list_products"


def test_a_keys_allow_list_holds_whatever_allow_list_the_runs_context_sends(executor):
    user = {"identity": "alice", KEY_FIELD: _key(["shop.delete_product"])}
    assert _turn(executor, user=user) == "tools: "  # its scope does not reach the delete
    user = {"identity": "alice", KEY_FIELD: _key(["shop.list_products"])}
    sent = {"allow": "all"}  # the run's context, as an HTTP client sends it
    assert _turn(executor, user=user, context=sent) == "tools: shop_list_products"


def test_on_the_server_a_caller_object_in_the_context_is_refused(executor):
    """A context schema that builds a ``Caller`` from the client's JSON (a pydantic model with
    ``caller: Caller``) would let the client choose whose rights apply."""
    context = TurnContext(caller=Caller.session("bob"))
    with pytest.raises(MissingCallerError, match="not accepted there"):
        _turn(executor, user={"identity": "alice"}, context=context)
    with pytest.raises(MissingCallerError, match="not accepted there"):
        _turn(executor, user={"identity": "", "is_authenticated": False}, context=context)


def test_studios_own_user_acts_for_the_default_caller_only_without_custom_auth(
    executor, monkeypatch
):
    studio = {"identity": "langgraph-studio-user", "kind": "StudioUser"}
    default = Caller.session("alice")
    monkeypatch.delenv("LANGGRAPH_AUTH", raising=False)
    assert _turn(executor, user=studio, default=default) == "tools: shop_list_products"
    monkeypatch.setenv("LANGGRAPH_AUTH", '{"path": "auth.py:auth"}')  # what langgraph dev sets
    with pytest.raises(MissingCallerError, match="disable_studio_auth"):
        _turn(executor, user=studio, default=default)


def test_a_caller_sent_as_data_is_refused_even_for_a_signed_in_user(executor):
    with pytest.raises(MissingCallerError, match="not accepted"):
        _turn(executor, user={"identity": "bob"}, context={"caller": {"user_id": "alice"}})


def test_a_run_with_no_signed_in_user_and_no_default_caller_fails_saying_how_to_sign_in(executor):
    with pytest.raises(MissingCallerError, match="sign the request in") as failed:
        _turn(executor)
    assert "TURNKIT_DEFAULT_USER" in str(failed.value)
    with pytest.raises(MissingCallerError):
        _turn(executor, user={"identity": "langgraph-studio-user", "kind": "StudioUser"})
