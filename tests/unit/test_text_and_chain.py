"""Inert text for humans' terminals, journal seals, shipped programs, and input checks (pure)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rsk.cluster.remote import Remote
from rsk.errors import UsageError
from rsk.local.inert import inert, inert_lines, inert_output
from rsk.request.inputs import check_env, check_request
from rsk.wire import bundle
from rsk.wire.chain import check, seal
from rsk.wire.protocol import Request


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text é 漢", "plain text é 漢"),
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb\nc\td", "a\\rb\\nc\\td"),
        ("\x9b31m", "\\x9b31m"),  # C1
        ("x\u202ey", "x\\u202ey"),  # right-to-left override
        ("x\u2066y\u200by", "x\\u2066y\\u200by"),  # isolate, zero-width space
        ("\u2028", "\\u2028"),  # line separator
        ("back\\slash", "back\\\\slash"),  # an escape cannot be faked
        ('echo "ok"' + " " * 400 + "; curl x | sh", 'echo "ok"⟨400 spaces⟩; curl x | sh'),  # a tail pushed out of sight
        ("        indented  a   b", "        indented  a   b"),  # indentation and short runs stay
        # no blank but the ASCII space shows as itself, and none can stand in for a space in a counted run
        (
            'echo "ok"' + "\u00a0" * 8000 + "; curl x | sh",
            'echo "ok"⟨8000 blank, invisible or control characters⟩; curl x | sh',
        ),
        ("a" + "\u00a0\u200b" * 500 + "; curl", "a⟨1000 blank, invisible or control characters⟩; curl"),  # interleaved
        (
            "a" + "\u2800" * 20 + "b" + "\u3164" * 3 + "c\u2003d",
            "a⟨20 blank, invisible or control characters⟩b\\u3164\\u3164\\u3164c\\u2003d",
        ),  # braille and Hangul fillers, an em space
        (" " * 8000 + "curl x | sh", "⟨8000 spaces⟩curl x | sh"),  # indentation beyond a terminal's width
        (" " * 79 + "x", " " * 79 + "x"),
        ("\u00a0" * 3 + "x", "\\xa0\\xa0\\xa0x"),
        ("\t" * 20 + "x", "⟨20 blank, invisible or control characters⟩x"),
    ],
)
def test_inert(raw: str, shown: str) -> None:
    assert inert(raw) == shown
    assert all(ch.isprintable() for ch in inert(raw))


def test_inert_lines_keep_line_breaks_only() -> None:
    assert inert_lines("a\n\x1b[1mb\r\nc") == ["a", "\\x1b[1mb\\r", "c"]


def test_a_jobs_output_keeps_its_lines_and_shows_every_other_control_as_text() -> None:
    """`rsk logs` on a terminal: lines, tabs and a progress bar's carriage returns as written; no escape sequence
    (screen clear, cursor, OSC 52 clipboard, title), C1 control, bell or bidi override reaches the terminal."""
    raw = "epoch 1\r\x1b[2K\x1b]52;c;eA==\x07\x9b2J\x1b]0;t\x1b\\\tok \u202eabc\u2069 é\n\x00\x7f"
    shown = inert_output(raw)
    assert shown == "epoch 1\r\\x1b[2K\\x1b]52;c;eA==\\x07\\x9b2J\\x1b]0;t\\x1b\\\tok \\u202eabc\\u2069 é\n\\x00\\x7f"
    assert all(ch.isprintable() or ch in "\n\t\r" for ch in shown)
    assert inert_output("C:\\path\\x1b") == "C:\\path\\x1b"  # a backslash is the job's own text


def sealed(prev: str, lines: list[str]) -> list[str]:
    s = seal(prev, lines)
    return [*lines[:-1], f"{lines[-1]} h={s}"]


def test_a_chain_of_blocks_checks_out_and_an_edit_is_found() -> None:
    b1 = sealed("", ["v=2 ev=intent rid=a"])
    b2 = sealed(b1[-1][-16:], ["v=2 ev=accepted rid=a job=1", "v=2 ev=intent rid=b"])
    lines = list(enumerate(b1 + b2, 1))
    report = check("", lines)
    assert report.ok and report.head_line == 3
    # the shell computes the same seal: sha256 of the previous seal, a newline, and the block
    expected = hashlib.sha256(b"\nv=2 ev=intent rid=a\n").hexdigest()[:16]
    assert b1[0].endswith(expected)
    edited = [(n, t.replace("job=1", "job=9")) for n, t in lines]
    bad = check("", edited)
    assert not bad.ok and "2-3" in bad.problems[0]


def test_an_unsealed_tail_is_reported() -> None:
    b1 = sealed("", ["v=2 ev=intent rid=a"])
    report = check("", [(1, b1[0]), (2, "v=2 ev=acc")])
    assert not report.ok and "no seal" in report.problems[0] and report.head_line == 1


def test_programs_are_whole_and_bound_to_the_content_digest() -> None:
    for entry in bundle.ENTRIES:
        text = bundle.program(entry)
        assert text.rstrip().endswith('main "$@"')  # one call, at the end
        assert text.count('\nmain "$@"') == 1, entry
        assert f"RSK_SCRIPTS={bundle.digest()}" in text
        assert text.isascii(), entry  # the loader counts characters as bytes
    assert "rsk_main" in bundle.program("submit") and "rsk_main" not in bundle.program("status")
    # only opening a lease ships the controller
    assert "RSK_CONTROLLER=" in bundle.program("submit-lease") and "RSK_CONTROLLER=" not in bundle.program("submit")


MAX_ARG_STRLEN = 128 * 1024  # Linux's limit on one argument; sshd hands the whole command to `sh -c` as one


@pytest.mark.parametrize("entry", sorted(bundle.ENTRIES))
def test_the_command_as_sent_stays_under_half_the_argument_limit(entry: str) -> None:
    # the command line exactly as transport sends it, with a long remote root and many long arguments
    conn = SimpleNamespace(target=SimpleNamespace(remote_root="~/" + "r" * 1024, path=["/opt/" + "p" * 256]))
    command = Remote(conn).command(entry, tuple("a'b\"c $x" * 8 for _ in range(16)))  # type: ignore[arg-type]
    assert len(command.encode()) < MAX_ARG_STRLEN // 2
    assert "rsk_start" not in command  # the program travels on stdin, not on the command line


def test_a_targets_path_goes_first_on_the_clusters_path_quoted() -> None:
    conn = SimpleNamespace(target=SimpleNamespace(remote_root="~/.rsk", path=["/opt/slurm/bin", "/opt/a b"]))
    command = Remote(conn).command("status", ())  # type: ignore[arg-type]
    assert command.startswith("PATH='/opt/slurm/bin:/opt/a b':\"$PATH\" RSK_ROOT=")
    plain = SimpleNamespace(target=SimpleNamespace(remote_root="~/.rsk", path=[]))
    assert Remote(plain).command("status", ()).startswith("RSK_ROOT=")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["bin", "/opt/x:/tmp", "/opt/x\n/tmp", ""])
def test_a_targets_path_takes_only_absolute_directories(tmp_path: Path, bad: str) -> None:
    from rsk.cluster.targets import load_target_file
    from rsk.errors import StateError

    f = tmp_path / "hpc.toml"
    f.write_text(f"host = 'hpc'\npath = [{json.dumps(bad)}]\n")
    with pytest.raises(StateError, match="path"):
        load_target_file(f)
    f.write_text("host = 'hpc'\npath = ['/opt/slurm/bin']\n")
    assert load_target_file(f).path == ["/opt/slurm/bin"]


def test_what_is_shipped_ahead_of_the_request_is_the_program_and_its_exact_length() -> None:
    for entry in bundle.ENTRIES:
        head, _, body = bundle.shipped(entry).partition(b"\n")
        assert head == f"rsk-program {len(body)}".encode() and body.decode("ascii") == bundle.program(entry)


def test_reserved_environment_names_and_non_utf8_are_refused() -> None:
    for entry in ("SLURM_JOB_ID=1", "RSK_HOME=x", "rsk_run=x", "PATH=/x", "SBATCH_GRES=gpu:4", "1X=y", "NOEQ"):
        with pytest.raises(UsageError):
            check_env(entry)
    assert check_env("CUDA_HOME=/opt/cuda") == "CUDA_HOME=/opt/cuda"
    with pytest.raises(UsageError, match="UTF-8"):
        check_request(Request(project="p", argv=["echo", "\udcff"]))
    with pytest.raises(UsageError):
        check_request(Request(project="p", argv=["true"], env=["SLURM_X=1"]))
