"""Every --json answer is one object with its schema_version, its lists in named fields; errors follow one rule
(`error` is the specific reason, `exit_code` its class). Without a cluster: the ledger's commands answer for
real, the cluster's answer with their error document (tests/integration/test_answers.py reads them on the lab)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsk.commands import COMMANDS
from rsk.errors import Exit
from tests.conftest import rsk


def _doc(out: str) -> dict[str, object]:
    doc = json.loads(out)
    assert isinstance(doc, dict) and isinstance(doc.get("schema_version"), int), out
    return doc


@pytest.fixture
def nowhere(tmp_path: Path) -> dict[str, str]:
    """A target nobody answers on: every cluster command ends in its error document, quickly."""
    d = tmp_path / "targets"
    d.mkdir()
    (d / "known_hosts").write_text("")
    (d / "nowhere.toml").write_text(f'host = "127.0.0.1"\nport = 1\nuser = "nobody"\nconnect_timeout = 2\n'
                                    f'known_hosts = "{d / "known_hosts"}"\n')  # fmt: skip
    return {"RSK_TARGETS_PATH": str(d), "RSK_TARGET": "nowhere"}


LEDGER_READS = ["approvals", "grant list", "deny-rule list", "targets"]
CLUSTER = [
    ["status"], ["events"], ["journal"], ["logs", "123"], ["info"], ["gpus"], ["doctor"], ["cancel", "123"],
    ["reconcile"], ["fetch", "123", "out.txt"], ["lease", "status"], ["watch", "--once"],
    ["plan", "--", "true"], ["launch", "--", "true"], ["retry", "--batch", "b1", "--failed"],
    ["extend", "--request-id", "c1", "--budget", "1:00:00"], ["wait", "123", "--timeout", "1"],
]  # fmt: skip


def test_every_command_is_covered_here() -> None:
    """A new command must say here how its --json answers (or why it has none)."""
    no_json = {"mcp", "ui"}  # a protocol of its own; the human's page
    human = {"approve", "deny", "grant", "deny-rule", "withdraw", "init", "broker"}  # the tests below
    seen = {a.split()[0] for a in LEDGER_READS} | {c[0] for c in CLUSTER} | no_json | human
    assert seen == set(COMMANDS), set(COMMANDS) ^ seen


@pytest.mark.parametrize("argv", LEDGER_READS)
def test_ledger_reads_answer_an_object_with_a_named_list(argv: str, rsk_env: Path, project: str) -> None:
    r = rsk(*argv.split(), *([] if argv == "targets" else ["-p", project]), "--json")
    assert r.rc == 0, r.err
    doc = _doc(r.out)
    field = {"approvals": "cards", "grant list": "grants", "deny-rule list": "rules", "targets": "targets"}[argv]
    assert isinstance(doc[field], list), doc
    if argv != "targets":
        assert doc["project"] == project


def test_approvals_list_the_project_in_forces_cards_and_every_projects_only_when_asked(
    rsk_env: Path, project: str
) -> None:
    from tests.ui_cards import file_card

    mine = file_card(project)
    theirs = file_card(f"{project}-other", "c-0123456789cd")
    doc = _doc(rsk("approvals", "--json", env={"RSK_PROJECT": project}).out)  # an agent in its own project
    assert doc["project"] == project and [c["id"] for c in doc["cards"]] == [mine.id]
    every = _doc(rsk("approvals", "--all-projects", "--json").out)  # the human's view
    assert every["project"] is None and sorted(c["id"] for c in every["cards"]) == sorted([mine.id, theirs.id])
    text = rsk("approvals", "--all-projects").out
    assert f"card {mine.id}  [pending]  project {project} " in text
    assert f"card {theirs.id}  [pending]  project {project}-other " in text
    elsewhere = rsk("approvals", "-p", f"{project}-none")
    assert elsewhere.rc == 0 and f"no pending approval cards in project {project}-none" in elsewhere.out
    assert "2 card(s) wait in other projects: rsk approvals --all-projects" in elsewhere.out
    both = rsk("approvals", "--all-projects", "-p", project, "--json")
    assert both.rc == Exit.USAGE and _doc(both.out)["error"] == "usage"
    shown = _doc(rsk("approvals", "show", mine.id, "--json").out)
    assert shown["project"] == project and shown["card"]["id"] == mine.id


def test_targets_name_the_one_commands_use_by_default(rsk_env: Path, nowhere: dict[str, str]) -> None:
    doc = _doc(rsk("targets", "--json", env=nowhere).out)
    assert doc["pinned"] == "nowhere" and [t["name"] for t in doc["targets"]][:1] == ["nowhere"]


def test_withdraw_answers_what_it_did_not_the_stored_card(rsk_env: Path, project: str) -> None:
    from tests.ui_cards import file_card

    card = file_card(project)
    r = rsk("withdraw", card.id, "-p", project, "--json")
    assert r.rc == 0, r.err
    doc = _doc(r.out)
    assert doc["card_id"] == card.id and doc["status"] == "withdrawn" and doc["request_id"] == card.request_id
    assert doc["project"] == project and doc["target"] == "lab" and "plan" not in doc and "request" not in doc
    again = rsk("withdraw", card.id, "-p", project, "--json")
    assert again.rc == Exit.USAGE and _doc(again.out)["error"] == "usage"


def test_approve_and_deny_answer_the_same_shape(rsk_env: Path, project: str) -> None:
    from tests.ui_cards import file_card

    a = file_card(project, "c-aaaaaaaaaaaa", plan_hash="a" * 64)
    d = file_card(project, "c-dddddddddddd", plan_hash="d" * 64)
    approved = _doc(rsk("approve", a.id, "-p", project, "--uses", "2", "--yes", "--json").out)
    assert approved["status"] == "approved" and approved["card_id"] == a.id
    assert approved["approval"]["uses_left"] == 2 and approved["approval"]["plan_hash"] == "a" * 64
    denied = _doc(rsk("deny", d.id, "-p", project, "--reason", "too big", "--yes", "--json").out)
    assert denied["status"] == "denied" and denied["reason"] == "too big" and denied["approval"] is None
    assert set(approved) == set(denied)


def test_a_pending_cards_wait_names_its_target_and_request(rsk_env: Path, project: str) -> None:
    from tests.ui_cards import file_card

    card = file_card(project)
    r = rsk("wait", card.id, "-p", project, "--timeout", "1", "--json")
    assert r.rc == Exit.PENDING, (r.out, r.err)
    doc = _doc(r.out)
    assert doc["status"] == "pending" and doc["card_id"] == card.id
    assert doc["target"] == "lab" and doc["request_id"] == card.request_id


def test_init_and_broker_status_answer_objects(rsk_env: Path, tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.conftest import ROOT, RSK

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ran = subprocess.run([*RSK, "init", "-p", "pj", "--json"], cwd=tmp_path, capture_output=True, text=True, env=env,
                         check=False)  # fmt: skip
    assert _doc(ran.stdout)["project"] == "pj"
    assert _doc(rsk("broker", "status", "--socket", str(tmp_path / "none.sock"), "--json").out)["up"] is False


@pytest.mark.parametrize("argv", CLUSTER, ids=lambda a: a[0])
def test_a_cluster_command_that_cannot_connect_answers_its_error_document(
    argv: list[str], rsk_env: Path, project: str, nowhere: dict[str, str]
) -> None:
    cut = argv.index("--") if "--" in argv else len(argv)
    mine = [] if argv[0] == "doctor" else ["-p", project]
    r = rsk(*argv[:cut], *mine, "--json", *argv[cut:], env=nowhere, timeout=60)
    if argv[0] == "watch":  # a target that does not answer is shown stale: an answer, not an error
        doc = _doc(r.out)
        assert r.rc == 0 and doc["stale"], doc
        return
    if argv[0] == "doctor":  # its failing checks are its answer
        doc = _doc(r.out)
        assert r.rc == Exit.CHECKS and not doc["ok"], doc
        return
    assert r.rc == Exit.CONNECT, (argv, r.rc, r.out, r.err)
    doc = _doc(r.out)
    assert doc["error"] == "connect" and doc["exit_code"] == Exit.CONNECT and doc["retryable"] is True


def test_one_key_names_an_errors_reason() -> None:
    """`error` is the specific reason; no other key carries one (the rule in rsk.errors)."""
    from rsk.errors import ConflictError, UsageError
    from rsk.wire.protocol import Output, Record, raise_for_error

    doc = UsageError("no job", code="not-found", details={"card_id": "c-1", "error": "x", "exit_code": 9}).to_json()
    assert doc["error"] == "not-found" and doc["exit_code"] == Exit.USAGE and doc["card_id"] == "c-1"
    assert "code" not in doc and doc["schema_version"] == 1
    assert UsageError("plain").to_json()["error"] == "usage"
    remote = Output([Record("error", [], {"code": "request-conflict", "msg": ""})], 5)
    with pytest.raises(ConflictError) as info:
        raise_for_error(remote)
    doc = info.value.to_json()
    assert doc["error"] == "request-conflict" and doc["exit_code"] == Exit.CONFLICT and "remote_code" not in doc


def test_work_with_no_project_chosen_is_refused_and_default_only_when_named(
    rsk_env: Path, tmp_path: Path, nowhere: dict[str, str]
) -> None:
    import os
    import subprocess

    from tests.conftest import ROOT, RSK

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_BROKER": "off", **nowhere}
    for command in (["plan"], ["launch"], ["lease", "open", "dev"], ["retry", "-b", "b", "--failed"],
                    ["extend", "-r", "c", "--budget", "9"]):  # fmt: skip
        extra = ["--", "true"] if command[0] in ("plan", "launch") else ["--time", "5"] if command[0] == "lease" else []
        ran = subprocess.run([*RSK, *command, "--json", *extra], cwd=tmp_path, capture_output=True, text=True,
                             env=env, check=False, timeout=60)  # fmt: skip
        assert ran.returncode == Exit.USAGE, (command, ran.stdout, ran.stderr)
        doc = json.loads(ran.stdout)
        assert doc["error"] == "no-project" and "rsk init --project" in doc["hint"], doc
        assert not (rsk_env / "projects" / "default").exists()  # nothing filed, held or charged anywhere
    for chosen in (["-p", "default"], []):  # named on purpose, even `default`: planned (then the unknown target)
        named = {**env, "RSK_PROJECT": "default"} if not chosen else env
        ran = subprocess.run([*RSK, "plan", *chosen, "--json", "--", "true"], cwd=tmp_path, capture_output=True,
                             text=True, env=named, check=False, timeout=60)  # fmt: skip
        assert json.loads(ran.stdout)["error"] != "no-project", ran.stdout
    (tmp_path / ".rsk.toml").write_text('project = "default"\n')  # a project file that names it chooses it too
    ran = subprocess.run([*RSK, "plan", "--json", "--", "true"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, check=False, timeout=60)  # fmt: skip
    assert json.loads(ran.stdout)["error"] != "no-project", ran.stdout


def test_fetched_results_are_never_part_of_a_code_snapshot(tmp_path: Path) -> None:
    from rsk.ops.fetch import default_dest
    from rsk.request.code import snapshot

    (tmp_path / "train.py").write_text("print(1)\n")
    before = snapshot(tmp_path, git=False).digest
    dest = tmp_path / default_dest("1234")
    dest.mkdir(parents=True)
    (dest / "metrics.json").write_text("{}")
    assert snapshot(tmp_path, git=False).digest == before
    assert default_dest("1234") == Path("rsk-results/1234")


@pytest.mark.parametrize(("argv", "says"), [([], "logs of one thing"), (["1", "-r", "r1"], "logs of one thing"),
                                            (["-r", "r1", "--follow"], "--follow follows one job")])  # fmt: skip
def test_logs_of_a_request_or_a_job_but_not_both(argv: list[str], says: str, rsk_env: Path) -> None:
    r = rsk("logs", *argv, "--json")
    assert r.rc == Exit.USAGE and says in _doc(r.out)["message"], (r.out, r.err)


def test_what_is_not_there_is_not_found(rsk_env: Path, project: str) -> None:
    for argv in (["approvals", "show", "c-000000000000"], ["wait", "c-000000000000"], ["grant", "show", "g-0"],
                 ["withdraw", "c-000000000000"]):  # fmt: skip
        r = rsk(*argv, "-p", project, "--json")
        assert r.rc == Exit.USAGE and _doc(r.out)["error"] == "not-found", (argv, r.out)


def test_withdraw_takes_back_only_the_project_in_forces_cards(rsk_env: Path, project: str) -> None:
    from tests.ui_cards import file_card

    theirs = file_card(f"{project}-other")
    r = rsk("withdraw", theirs.id, "-p", project, "--json")
    assert r.rc == Exit.USAGE and _doc(r.out)["error"] == "not-ours", r.out
    listed = _doc(rsk("approvals", "-p", f"{project}-other", "--json").out)["cards"]
    assert [(c["id"], c["status"]) for c in listed] == [(theirs.id, "pending")]  # still waits for the human
    assert rsk("withdraw", theirs.id, "-p", f"{project}-other", "--json").rc == 0


def test_approvals_show_without_a_card_says_it_needs_one(rsk_env: Path, project: str) -> None:
    r = rsk("approvals", "show", "-p", project, "--json")
    assert r.rc == Exit.USAGE and "needs a CARD" in _doc(r.out)["message"], r.out
