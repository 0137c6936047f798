"""Random and hostile input to the readers: always a typed error, never a traceback, never a rewritten file."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rsk.cluster.targets import load_target_file
from rsk.errors import RskError
from rsk.ledger.models import DenyRule
from rsk.ledger.store import Store, read_ledger
from rsk.wire import answers
from rsk.wire.protocol import parse, raise_for_error, unb64

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

words = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
at_lines = st.lists(
    st.one_of(
        st.builds(
            lambda k, w: f"@@{k} {w}",
            st.sampled_from(["planline", "plan", "error", "done", "accepted", "job", "policy", "x"]),
            words,
        ),
        words,
    ),
    max_size=30,
)


@SETTINGS
@given(at_lines)
def test_at_parser_gives_records_or_a_typed_error(lines: list[str]) -> None:
    text = "\n".join(line.replace("@@", "@@" + "0" * 32 + " ", 1) for line in lines)
    try:
        out = parse(text, "0" * 32)
        if out is not None:
            raise_for_error(out)
            answers.plan(out)
    except RskError:
        pass


@SETTINGS
@given(st.text(max_size=60))
def test_unb64_is_total(value: str) -> None:
    with contextlib.suppress(RskError):
        unb64(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
ledger_like = st.fixed_dictionaries(
    {"schema_version": st.one_of(st.integers(-2, 4), st.text(max_size=3)), "project": st.just("p")},
    optional={
        "grants": st.lists(
            st.dictionaries(
                st.sampled_from(["id", "jobs", "gpu_hours", "expires", "targets", "x"]), json_values, max_size=4
            ),
            max_size=3,
        ),
        "approvals": st.lists(
            st.dictionaries(st.sampled_from(["plan_hash", "uses_left", "decided_by"]), json_values), max_size=3
        ),
        "cards": json_values,
        "junk": json_values,
    },
)


@SETTINGS
@given(st.one_of(ledger_like.map(json.dumps), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_a_writer_never_crashes_on_a_ledger_and_never_rewrites_one_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Through the writing path (Store.transaction): a ledger it cannot read is refused with a typed
    error naming the file, and left byte for byte as it was; one it can read takes the change."""
    monkeypatch.setenv("RSK_HOME", str(tmp_path))
    store = Store("p")
    store.dir.mkdir(parents=True, exist_ok=True)
    store.path.write_text(text, encoding="utf-8")
    before = store.path.read_bytes()
    try:
        with store.transaction() as ledger:
            ledger.deny_rules.append(DenyRule(reason="fuzz"))
    except RskError as exc:
        assert str(store.path) in exc.message
        assert store.path.read_bytes() == before
    else:
        assert [r.reason for r in read_ledger(store.path, "p").deny_rules][-1] == "fuzz"


toml_like = st.lists(
    st.builds(
        lambda k, v: f"{k} = {v}",
        st.sampled_from(["host", "port", "user", "remote_root", "schema_version", "connect_timeout", "bogus"]),
        st.one_of(st.integers(-5, 70000).map(str), words.map(json.dumps), words),
    ),
    max_size=8,
)


@SETTINGS
@given(st.one_of(toml_like.map("\n".join), st.text(max_size=200)))
def test_target_reader_gives_a_target_or_a_typed_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text, encoding="utf-8")
    try:
        target = load_target_file(path)
        assert target.host and target.source == str(path)
    except RskError as exc:
        assert str(path) in exc.message


@pytest.mark.parametrize(
    "text",
    ['{"schema_version": 1, "project": "p", "grants": [{"jobs": "many"}]}', "[]", "null", '"x"', "{", ""],
)
def test_known_bad_ledgers_are_state_errors(tmp_path: Path, text: str) -> None:
    from rsk.errors import StateError

    path = tmp_path / "ledger.json"
    path.write_text(text)
    with pytest.raises(StateError):
        read_ledger(path, "p")
