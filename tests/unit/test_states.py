"""The state table: terminal states are sinks, every state reaches a terminal one, and the
diagram of the documentation's "How a job goes" agrees with the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.states import ALLOWED, HOLDS_SESSION, TERMINAL, JobState, can_transition

LIFECYCLE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "lifecycle.md"


def test_terminal_states_have_no_exit() -> None:
    for t in TERMINAL:
        assert ALLOWED[t] == frozenset()


def test_every_state_can_reach_a_terminal_state() -> None:
    for start in JobState:
        seen, todo = {start}, [start]
        while todo:
            for nxt in ALLOWED[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & TERMINAL, start


@pytest.mark.parametrize("src", sorted(HOLDS_SESSION - {JobState.RELEASING}))
def test_a_held_session_is_released_before_success(src: JobState) -> None:
    assert not can_transition(src, JobState.SUCCEEDED)


def test_the_documented_diagram_matches_table() -> None:
    text = LIFECYCLE.read_text()
    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    edges = set()
    for src, dst in re.findall(r"^\s*(\w+)\s*-->\s*(\w+)", block, flags=re.M):
        if src == "[*]" or dst == "[*]":
            continue
        edges.add((JobState[src], JobState[dst]))
    table = {(s, d) for s, ds in ALLOWED.items() for d in ds}
    assert edges == table
