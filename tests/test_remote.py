"""The terminal UI's worker in this process (Remote(in_process=True), INSPECTOR_WORKER=thread), as
the UI's tests use it: the same answers as the child process gives, copies both ways, and a cancel
that answers the waiting call at once."""
from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import pytest

from inspector.remote import Remote

GATE = threading.Event()


class Session:
    """A stand-in for inspector.session.Session: picklable, with methods that return plain data."""

    def __init__(self):
        self.seen: list = []

    def report(self, value):
        self.seen.append(value)
        return {"value": value, "seen": list(self.seen)}

    def held(self):
        GATE.wait(30)
        return "late"

    def fails(self):
        raise ValueError("no such view")


def test_the_variable_picks_the_thread(monkeypatch):
    monkeypatch.setenv("INSPECTOR_WORKER", "thread")
    assert Remote().in_process
    monkeypatch.delenv("INSPECTOR_WORKER")
    assert not Remote(in_process=False).in_process and Remote(in_process=True).in_process


def test_calls_go_through_pickle_both_ways():
    """As to a child: the session is a copy (what the call does to it stays there) and so is the answer."""
    remote, session = Remote(in_process=True), Session()
    try:
        first = remote.call(session, "report", 1)
        assert first == {"value": 1, "seen": [1]} and session.seen == []
        assert remote.call(session, "report", 2) == {"value": 2, "seen": [2]}
        with pytest.raises(ValueError, match="no such view"):
            remote.call(session, "fails")
        assert not remote.busy
    finally:
        remote.close()


def test_a_cancel_answers_the_waiting_call_at_once_and_voids_older_epochs():
    remote, session = Remote(in_process=True), Session()
    GATE.clear()
    answers: list = []

    def ask():
        try:
            answers.append(remote.call(session, "held", epoch=remote.epoch))
        except CancelledError as err:
            answers.append(err)

    caller = threading.Thread(target=ask)
    try:
        epoch = remote.epoch
        caller.start()
        while not remote.busy:
            time.sleep(0.01)
        assert remote.cancel() is True
        caller.join(5)
        assert not caller.is_alive() and isinstance(answers[0], CancelledError)  # not "late": the thread is still held
        with pytest.raises(CancelledError):
            remote.call(session, "report", 3, epoch=epoch)
        assert remote.call(session, "report", 4, epoch=remote.epoch)["value"] == 4  # a fresh thread, not behind the held one
        assert remote.cancel() is False  # idle: nothing to stop
    finally:
        GATE.set()
        remote.close()
