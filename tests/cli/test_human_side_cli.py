"""The human's rsk run in a tree an agent writes, without a cluster: targets and ssh settings come only from
the human's configuration (ADR 0054), a file rsk reads there is never reached through a link (ADR 0055), and
what cannot work says so as a typed error, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import Ran, rsk


def clean(r: Ran) -> Ran:
    assert "Traceback" not in r.err and "error:" in r.err and "hint:" in r.err, r.err
    return r


def target_text(**fields: object) -> str:
    base: dict[str, object] = {"host": "127.0.0.1", "port": 1, "user": "nobody", "connect_timeout": 2}
    base.update(fields)
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The agent's working tree: a targets/lab.toml naming its own ssh_config, whose ProxyCommand would leave
    a mark if it ever ran (as the human)."""
    t = tmp_path / "agent-tree"
    (t / "targets").mkdir(parents=True)
    (t / "ssh_config").write_text(f"Host *\n  ProxyCommand touch {t / 'RAN'}\n")
    (t / "known_hosts").write_text("")
    (t / "targets" / "lab.toml").write_text(target_text(ssh_config="ssh_config", known_hosts=str(t / "known_hosts")))
    return t


def human_target(name: str = "lab", **fields: object) -> Path:
    """A target in the human's own configuration (XDG_CONFIG_HOME/rsk/targets)."""
    d = Path(os.environ["XDG_CONFIG_HOME"]) / "rsk" / "targets"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.toml").write_text(target_text(**fields))
    return d / f"{name}.toml"


def test_a_planted_targets_directory_is_never_read(tree: Path, project: str) -> None:
    """The way it was found: a targets/lab.toml in the working tree replaced the human's, and its ssh_config's
    ProxyCommand ran as the human. Now the human's own target is used, and the planted one never read."""
    human_target(known_hosts=str(tree / "known_hosts"))
    r = rsk("status", "-t", "lab", "-p", project, cwd=tree)
    assert r.rc == Exit.CONNECT and "127.0.0.1:1" in r.err, (r.rc, r.err)  # the human's target: port 1
    assert not (tree / "RAN").exists()
    names = json.loads(rsk("targets", "--json", cwd=tree).out)["targets"]
    assert [t["source"] for t in names] == [str(human_target(known_hosts=str(tree / "known_hosts")))]


def test_a_target_only_the_working_tree_has_is_refused_with_a_hint(tree: Path, project: str) -> None:
    r = clean(rsk("status", "-t", "lab", "-p", project, "--json", cwd=tree))
    doc = json.loads(r.out)
    assert r.rc == Exit.CONFIG and doc["error"] == "target-in-tree", doc
    assert str(tree / "targets" / "lab.toml") in doc["message"] and "is not read" in doc["message"]
    assert "rsk/targets" in doc["hint"]
    assert not (tree / "RAN").exists()


@pytest.mark.parametrize("field", ["ssh_config", "identity_file", "known_hosts"])
def test_a_target_naming_a_file_by_a_relative_path_is_refused(tree: Path, project: str, field: str) -> None:
    """A relative path is read from wherever rsk runs: the agent's tree (its ssh_config, key or host keys)."""
    fields: dict[str, object] = {"ssh_config": str(tree / "none"), "known_hosts": str(tree / "known_hosts")}
    fields[field] = "ssh_config" if field == "ssh_config" else "known_hosts"
    if field != "ssh_config":
        fields.pop("ssh_config")
    human_target(**fields)
    r = clean(rsk("status", "-t", "lab", "-p", project, "--json", cwd=tree))
    doc = json.loads(r.out)
    assert r.rc == Exit.CONFIG and doc["error"] == "relative-path" and field in doc["message"], doc
    assert not (tree / "RAN").exists()


def test_relative_rsk_targets_path_and_rsk_home_are_refused(tree: Path, project: str) -> None:
    """The process's own settings (a broker has its own, made absolute when it starts): run here."""
    here = {"RSK_BROKER": "off"}
    r = clean(rsk("status", "-t", "lab", "-p", project, cwd=tree, env={**here, "RSK_TARGETS_PATH": "targets"}))
    assert r.rc == Exit.CONFIG and "RSK_TARGETS_PATH" in r.err
    r = clean(rsk("grant", "list", "-p", project, cwd=tree, env={**here, "RSK_HOME": "state"}))
    assert r.rc == Exit.CONFIG and "RSK_HOME" in r.err and not (tree / "state").exists()
    assert not (tree / "RAN").exists()


def test_a_proxy_command_that_fails_is_a_typed_error(tmp_path: Path, project: str) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gone\n  ProxyCommand {tmp_path / 'no-such-command'} %h %p\n"
                   "Host ends\n  ProxyCommand sh -c 'exit 3'\n")  # fmt: skip
    human_target("gone", host="gone", ssh_config=str(cfg), known_hosts=str(known))
    human_target("ends", host="ends", ssh_config=str(cfg), known_hosts=str(known))
    r = clean(rsk("status", "-t", "gone", "-p", project, "--json"))
    doc = json.loads(r.out)
    assert r.rc == Exit.CONFIG and doc["error"] == "proxy-command" and "cannot start" in doc["message"], doc
    r = clean(rsk("status", "-t", "ends", "-p", project, "--json"))
    doc = json.loads(r.out)
    assert r.rc == Exit.CONNECT and doc["error"] == "proxy-command" and "ended" in doc["message"], doc
    assert "paramiko" not in r.err


def test_a_script_or_tasks_file_reached_through_a_link_is_refused(tmp_path: Path, project: str) -> None:
    """The human's `rsk launch --script run.sh` in the agent's tree: a run.sh (or a directory on the way) that
    is a link to the human's key would send the key to the cluster as the job's script."""
    secret = tmp_path / "human"
    secret.mkdir()
    (secret / "key").write_text("#!/bin/sh\necho the-humans-secret\n")
    tree = tmp_path / "agent-tree"
    tree.mkdir()
    (tree / "run.sh").symlink_to(secret / "key")
    (tree / "dir").symlink_to(secret)
    for option, name in (("--script", "run.sh"), ("--script", "dir/key"), ("--tasks", "run.sh")):
        r = clean(rsk("plan", "-t", "nowhere", "-p", project, option, name, "--json", cwd=tree))
        doc = json.loads(r.out)
        assert r.rc == Exit.USAGE and doc["error"] == "link-refused", (option, name, doc)
        assert "the-humans-secret" not in r.out + r.err
