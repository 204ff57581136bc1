"""Failure limits and the one redaction every output passes through."""

import json

import pytest

from coalition_gym import result_files
from coalition_gym.errors import ConfigError
from coalition_gym.failures import FailureLimit, FailureSummary


def summary(rows):
    out = FailureSummary()
    for coalition, error in rows:
        out.add(coalition, error)
    return out


@pytest.mark.parametrize("text,limit", [("", FailureLimit()), ("default", FailureLimit()), ("0", FailureLimit(count=0)),
                                        ("3", FailureLimit(count=3)), ("5%", FailureLimit(fraction=0.05)),
                                        ("100%", FailureLimit(fraction=1.0))])
def test_limits_parse(text, limit):
    assert FailureLimit.parse(text) == limit


@pytest.mark.parametrize("text", ["-1", "x", "3.5", "101%", "-2%", "%"])
def test_bad_limits_are_refused(text):
    with pytest.raises(ConfigError, match="not a failure limit"):
        FailureLimit.parse(text)


def test_the_default_limit_is_a_dead_coalition_or_more_than_a_tenth():
    ok = [(("a",), None)] * 9
    assert not summary(ok + [(("a",), "boom")]).exceeds(FailureLimit())  # 1 of 10: not more than 10%
    assert summary(ok + [(("a",), "boom")] * 2).exceeds(FailureLimit())  # 2 of 11
    dead = summary([(("a",), None)] * 99 + [(("b",), "boom")])  # 1% but coalition {b} never ran
    assert dead.whole_coalitions == [("b",)] and dead.exceeds(FailureLimit())
    assert not dead.exceeds(FailureLimit(fraction=0.05)) and not dead.exceeds(FailureLimit(count=1))
    assert dead.exceeds(FailureLimit(count=0))
    assert not summary(ok).exceeds(FailureLimit(count=0))


def test_distinct_errors_are_counted_in_order_and_listed():
    s = summary([(("b", "a"), "second"), (("a", "b"), "first"), (("a",), "second"), (("a",), None)])
    assert list(s.errors.items()) == [("second", 2), ("first", 1)]
    assert s.per_coalition[("a", "b")] == [2, 2]  # coalitions are sets: order does not split them
    lines = s.lines()
    assert lines[0].startswith("3 of 4 episodes failed (a failed episode scores 0")
    assert "{a,b}" in lines[1] and lines[2:] == ["  2 x second", "  1 x first"]
    assert json.loads(json.dumps(s.to_dict()))["whole_coalitions"] == [["a", "b"]]


def test_redaction_covers_configured_values_escaped_forms_and_bearer_tokens(monkeypatch):
    monkeypatch.setenv("CGYM_TEST_REDACT_KEY", 'sk-"quoted\\key-42')
    result_files.register_key_variable("CGYM_TEST_REDACT_KEY")
    value = 'sk-"quoted\\key-42'
    assert result_files.redact(f"got {value}!") == "got [REDACTED]!"
    assert value not in result_files.dumps({"e": f"got {value}"})  # JSON escapes the quote and the backslash
    assert result_files.redact("Authorization: Bearer abcdef123456") == "Authorization: Bearer [REDACTED]"
    assert result_files.redact("short abc") == "short abc"
    monkeypatch.setenv("CGYM_TEST_REDACT_KEY", "abc")  # too short to be a key: ordinary text is left alone
    assert result_files.redact("abc") == "abc"
    assert result_files.redact_data({"k": ["x Bearer tok123456"]}) == {"k": ["x Bearer [REDACTED]"]}
