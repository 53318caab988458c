"""libtpu's dump children kept between estimates (inspector/libtpu/runner.py ``kept_sessions``): which
child an estimate is given, how many stay, and that every one ends with its scope."""
from __future__ import annotations

import os

import pytest

from inspector.base.chips import get_chip
from inspector.libtpu.runner import fresh_sessions, kept_sessions, open_session

TOPOLOGY = get_chip("tpu-v5e").topology
pytestmark = pytest.mark.libtpu  # the children start libtpu


def _one(profile: bool = False):
    with open_session(TOPOLOGY, profile=profile, bundles=False) as session:
        return session


def test_a_kept_child_serves_the_next_estimate_and_ends_with_the_scope():
    with fresh_sessions(), kept_sessions():
        first = _one()
        assert _one() is first and os.path.isdir(first.folder)
    assert not os.path.exists(first.folder)


def test_past_the_limit_the_kind_used_longest_ago_ends():
    with fresh_sessions(), kept_sessions(limit=1):
        plain, profiled = _one(), _one(profile=True)
        assert plain is not profiled
        assert plain.folder is None or not os.path.exists(plain.folder)  # closed for the newer kind
        assert _one(profile=True) is profiled
    assert not os.path.exists(profiled.folder)


def test_a_child_started_with_other_flags_is_not_given_to_an_estimate_without_them(monkeypatch):
    with fresh_sessions(), kept_sessions(limit=2):
        plain = _one()
        monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_enable_log_recorder=false")
        flagged = _one()
        monkeypatch.delenv("LIBTPU_INIT_ARGS")
        assert flagged is not plain and _one() is plain


def test_outside_a_keeping_scope_each_estimate_ends_its_children():
    with fresh_sessions():
        session = _one()
    assert not session.alive and not os.path.exists(session.folder)
