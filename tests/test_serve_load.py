"""`bench.serve_load --replicas` without servers: which chats go where, the engine
summary, the moment of the kill, the steps a thread's checkpoints hold, and the rendered
section."""

from __future__ import annotations

from typing import Any

import pytest

from bench import render
from bench.serve_load import (
    KillMoment,
    chat_work,
    completed_steps,
    engine_summary,
    multi_hops,
)


def test_each_question_goes_to_each_replica_with_the_next_one_as_follow_up() -> None:
    work = chat_work(multi_hops(2))
    ids = [(chat, replica, first["id"], follow["id"]) for chat, replica, first, follow in work]
    assert ids == [
        (1, 1, "sample-1", "sample-2"),
        (2, 2, "sample-1", "sample-2"),
        (3, 1, "sample-2", "sample-3"),
        (4, 2, "sample-2", "sample-3"),
    ]
    last = chat_work(multi_hops())[-1]
    assert last[3]["id"] == "sample-1"  # the last question's follow-up wraps around


def turn(chat: int, n: int, replica: int, seconds: float, answered: bool = True) -> dict:
    return {
        "chat": chat,
        "turn": n,
        "replica": replica,
        "seconds": seconds,
        "answered": answered,
        "correct": answered and chat == 1,
        "events": {"updates": 3, "custom": 2},
    }


def test_the_engine_summary_counts_answered_turns_per_minute_and_lost_ones() -> None:
    records = [turn(1, 1, 1, 10), turn(1, 2, 1, 20), turn(2, 1, 2, 30), turn(2, 2, 2, 5, False)]
    summary = engine_summary(records, wall=60)
    assert summary["chats"] == 2 and summary["turns"] == 4
    assert (summary["answered"], summary["lost"], summary["correct"]) == (3, 1, 2)
    assert summary["turns_per_min"] == 3.0  # answered turns only
    assert summary["latency_s"]["p50"] == 20 and summary["latency_s_follow_up"]["max"] == 20
    assert summary["per_replica"]["2"] == {"turns": 2, "answered": 1, "correct": 0}
    assert summary["events"] == {"updates": 12, "custom": 8}


def test_the_kill_waits_for_half_the_killed_replicas_turns_and_a_step_of_each_other() -> None:
    moment = KillMoment([1, 3, 5, 7])
    assert not moment.ripe()
    moment.end(1)
    moment.end(3)
    moment.end(2)  # the other replica's: not counted
    assert not moment.ripe()  # 5 and 7 have streamed nothing yet
    moment.seen(5)("updates")
    moment.seen(7)("custom")
    assert not moment.ripe()
    moment.seen(7)("updates")
    assert moment.ripe()
    killed: list[bool] = []
    assert moment.wait_and(lambda: killed.append(True)) == {1, 2, 3} and killed
    single = KillMoment([1])  # one chat on the replica: killed at its first step
    single.seen(1)("updates")
    assert single.ripe()


def state(step: int, *tasks: tuple[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"step": step},
        "tasks": [{"name": name, "result": result} for name, result in tasks],
    }


def test_completed_steps_are_the_tasks_of_every_state_but_the_newest_and_its_saved_ones() -> None:
    history = [  # newest first, as the servers return it
        state(3, ("hop", None), ("compare", {"rows": 1})),
        state(2, ("hop", {"rows": 1})),
        state(1, ("plan", {})),
        state(0, ("question", None)),
        state(-1, ("__start__", None)),
    ]
    done = completed_steps(history)
    assert done == {"question": 1, "plan": 1, "hop": 1, "compare": 1}


REPORT = {
    "command": "python -m bench.serve_load --replicas --graph deft",
    "date": "2026-12-05T10:00:00+00:00",
    "machine": "x86_64, 2 cores",
    "questions": 8,
    "replicas": 2,
    "replica_lost_s": 30,
    "heartbeat_s": 5,
    "mark_beats": 6,
    "engines": {
        name: {
            "chats": 16,
            "turns": 32,
            "answered": 32,
            "correct": 20,
            "lost": 0,
            "turns_per_min": rate,
            "latency_s": {"p50": 100.0, "p90": 200.0, "max": 250.0},
        }
        for name, rate in (("development", 5.0), ("production", 4.5))
    },
    "fault": {
        "threads": 16,
        "readable": 16,
        "with_checkpoints": 16,
        "completed_before_kill": 4,
        "completed_after_kill_on_survivor": 8,
        "in_flight_on_killed": 4,
        "completed_there": 0,
        "marked_error": 4,
        "marked_error_naming_resume": 4,
        "not_ended_in_time": 0,
        "seconds_kill_to_end": {"max": 40.0},
        "resumed": 4,
        "resumed_right": 3,
        "lost_for_good": 0,
        "steps_streamed": 120,
        "checkpoints_lost": 0,
        "follow_ups": {"sent": 16, "answered": 16, "correct": 10},
        "threads_with_both_answers": 16,
    },
}


def test_the_section_compares_the_engines_and_meets_the_target_only_without_losses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(render, "load_results", lambda name: REPORT)
    text, standing = render.production_load()
    assert "## Production server: replicas, faults and load" in text
    assert "| `hoprag serve --production` (Aegra) | 16 | 32 | 32 | 20 | 0 | 4.5 |" in text
    assert standing[0][2] == "met" and standing[1][1].startswith("4.5 against 5.0 turns/min")
    lossy = {**REPORT, "fault": {**REPORT["fault"], "checkpoints_lost": 1}}
    monkeypatch.setattr(render, "load_results", lambda name: lossy)
    assert render.production_load()[1][0][2] == "not met"
    monkeypatch.setattr(render, "load_results", lambda name: None)
    assert render.production_load() == ("", [(standing[0][0], "not measured yet", "open")])
