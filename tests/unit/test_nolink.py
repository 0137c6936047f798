"""The human's rsk in a tree an agent writes: no link it placed is followed, no file it planted takes rsk's
writes, no command its tree names runs (rsk.local.nolink, ADR 0055)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def human(tmp_path: Path) -> Path:
    """A directory of the human's a planted link points at: nothing in it may change."""
    d = tmp_path / "human"
    d.mkdir()
    (d / "precious").write_text("precious\n")
    return d


def untouched(human: Path) -> None:
    assert sorted(p.name for p in human.iterdir()) == ["precious"]
    assert (human / "precious").read_text() == "precious\n"


def test_a_link_anywhere_on_the_way_is_refused_and_nothing_is_made_through_it(tmp_path: Path, human: Path) -> None:
    from rsk.local.nolink import Dir, LinkRefused

    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "b").symlink_to(human)
    for where in (tree / "a" / "b", tree / "a" / "b" / "c", tree / "a" / "b" / "c" / "d"):
        with pytest.raises(LinkRefused, match="a symbolic link"):
            Dir.open(where, create=True)
    (tree / "top").symlink_to(tree / "a")
    with pytest.raises(LinkRefused):
        Dir.open(tree / "top" / "x", create=True)
    assert not (tree / "a" / "x").exists()
    with Dir.open(tree / "a", create=True) as a, pytest.raises(LinkRefused):
        a.sub("b/new", create=True)
    untouched(human)
    with Dir.open(tree / "new" / "deep", create=True) as made:  # what is missing is made, as mkdir -p
        assert made.path == tree / "new" / "deep" and (tree / "new" / "deep").is_dir()


def test_a_file_rsk_writes_into_is_its_own_with_one_name(tmp_path: Path, human: Path) -> None:
    from rsk.local.nolink import Dir, LinkRefused

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "sym.rsk-part").symlink_to(human / "precious")
    os.link(human / "precious", tree / "hard.rsk-part")
    os.mkfifo(tree / "fifo.rsk-part")
    with Dir.open(tree) as d:
        for name in ("sym.rsk-part", "hard.rsk-part", "fifo.rsk-part"):  # a FIFO never holds the command
            with pytest.raises(LinkRefused):
                d.open_to_write(name)
        fh, size = d.open_to_write("new.rsk-part")
        with fh:
            assert size == 0
            fh.write(b"data")
        (tree / "dest").symlink_to(human / "precious")
        d.rename("new.rsk-part", d, "dest")  # the link is replaced, never written through
        d.write("label", b"text")
    assert (tree / "dest").read_bytes() == b"data" and not (tree / "dest").is_symlink()
    assert (tree / "label").read_bytes() == b"text"
    untouched(human)


def test_a_removed_tree_takes_nothing_a_link_in_it_leads_to(tmp_path: Path, human: Path) -> None:
    from rsk.local.nolink import Dir

    (tmp_path / "w" / "sub").mkdir(parents=True)
    (tmp_path / "w" / "sub" / "out").symlink_to(human)
    (tmp_path / "w2").symlink_to(human)
    with Dir.open(tmp_path) as d:
        d.remove_tree("w")
        d.remove_tree("w2")
    assert not (tmp_path / "w").exists() and not (tmp_path / "w2").exists()
    untouched(human)


def test_a_planted_temp_file_never_takes_what_rsk_init_writes(tmp_path: Path, human: Path) -> None:
    """`rsk init` writes .rsk.toml in the working tree through a temp file: one planted at the name the temp
    file had (its pid), as a link to the human's file, is never written through."""
    from rsk.local.project import write

    for name in (f"..rsk.toml.{os.getpid()}.tmp", "..rsk.toml.tmp"):  # (the file is .rsk.toml)
        (tmp_path / name).symlink_to(human / "precious")
    write(tmp_path, "p", None)
    assert 'project = "p"' in (tmp_path / ".rsk.toml").read_text()
    untouched(human)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_code_snapshot_reads_no_file_through_a_directory_linked_since_git_listed_it(
    tmp_path: Path, human: Path
) -> None:
    from rsk.errors import UsageError
    from rsk.request.code import snapshot

    root = tmp_path / "code"
    (root / "sub").mkdir(parents=True)
    (root / "run.sh").write_text("echo ok\n")
    (root / "sub" / "precious").write_text("the agent's\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    (root / "sub" / "precious").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(human)  # git's index still lists sub/precious; the link itself git ignores
    (root / ".gitignore").write_text("/sub\n")
    with pytest.raises(UsageError, match="sub is a symbolic link"):
        snapshot(root)
    (root / "sub").unlink()
    (root / "sub").mkdir()
    (root / "sub" / "precious").write_text("the agent's\n")
    snap = snapshot(root)
    assert [f.path for f in snap.files] == [".gitignore", "run.sh", "sub/precious"]
    (tmp_path / "link").symlink_to(root)
    with pytest.raises(UsageError, match="symbolic link"):  # the directory named, too: name its real path
        snapshot(tmp_path / "link")


def test_listing_a_tree_runs_no_command_its_git_config_names(tmp_path: Path) -> None:
    """core.fsmonitor in the tree's .git/config is a command `git ls-files` would run as the human."""
    from rsk.codelist import listed

    root = tmp_path / "code"
    root.mkdir()
    (root / "a").write_text("a\n")
    git(root, "init", "-q")
    git(root, "add", "a")
    ran = tmp_path / "ran"
    git(root, "config", "core.fsmonitor", f"touch {ran}; false")
    assert listed(str(root)) == ["a"]
    assert not ran.exists()


def test_a_walk_never_enters_rsks_own_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a fetch writes (rsk.local.handover.Place), whoever asks: not into RSK_HOME, rsk's configuration (its
    targets), RSK_TARGETS_PATH or ~/.ssh, nor below them, however the path is spelled (ADR 0065). Checked on each
    directory entered, by dev and inode: RSK_HOME named through a link is still its directory."""
    from rsk.local.handover import Place
    from rsk.local.nolink import KeptOut

    state, config, home, more = (tmp_path / n for n in ("state", "config", "home", "more"))
    for d in (state / "projects" / "p", config / "rsk" / "targets", home / ".ssh", more):
        d.mkdir(parents=True)
    (state / "projects" / "p" / "ledger.json").write_text("{}")
    (tmp_path / "state-link").symlink_to(state)
    monkeypatch.setenv("RSK_HOME", str(tmp_path / "state-link"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RSK_TARGETS_PATH", str(more))
    for where, rel in [
        (state / "projects" / "p", "ledger.json"),
        (tmp_path / "out" / ".." / "state" / "projects", "p/ledger.json"),
        (tmp_path, "state/projects/p/ledger.json"),
        (config / "rsk" / "targets", "lab.toml"),
        (home, ".ssh/authorized_keys"),
        (more, "lab.toml"),
    ]:
        with Place(where) as place, pytest.raises(KeptOut):
            place.put(rel, b"forged")
    assert (state / "projects" / "p" / "ledger.json").read_text() == "{}"
    assert not (config / "rsk" / "targets" / "lab.toml").exists() and not (home / ".ssh" / "authorized_keys").exists()
    assert not (more / "lab.toml").exists()
    with Place(tmp_path / "out") as place:
        place.put("results/a.txt", b"fine")
    assert (tmp_path / "out" / "results" / "a.txt").read_bytes() == b"fine"
