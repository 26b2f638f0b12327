"""The plain weather tools of the developer API's examples, shared by the Agent tests."""

from __future__ import annotations

from turnkit import tool


@tool(read_only=True)
def get_weather(city: str, units: str = "celsius") -> str:
    """Get current weather conditions for a city."""
    return f"{city}: 22°{units[0].upper()}"


@tool(read_only=True)
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"{city}: 14:00"
