"""The caller's files, opened only by the caller's own process: where a fetch writes, and what `--code` sends.

A brokered command never opens a path its caller names (ADR 0064): the broker runs as the human, and its caller
may be an agent in a sandbox or another OS user, whose own rights must bound what its command reads and writes.
So what a command reads of the caller's tree arrives as content its client read (`--script`, `--tasks`, the
project file, and `--code`'s files, listed and sent here by `CodeFiles`), and where a fetch writes is a `Place`
that the client itself opens and writes (ADR 0065): in the broker the command holds a `Handed`, which asks the
client, over the broker's wire, to do each step on its own `Place` (`serve`). Without a broker the command holds
the `Place` itself. Both walk from `/` following no link (rsk.local.nolink, ADR 0055), so the rules are one.

Standard library only (and rsk.errors, rsk.codelist, rsk.local.nolink): the broker's client imports this module
when a command asks it to read or write, and may be a Python with nothing else installed.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path

from rsk.codelist import MAX_BYTES, MAX_FILES, selected, travels
from rsk.errors import RskError, StateError, UsageError, from_json
from rsk.local.nolink import LINK_HINT, Dir, LinkRefused, Missing

TYPE_CHECKING = False  # typing takes ~10 ms to import in the broker's client; mypy reads this as typing's
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import BinaryIO, Protocol

    class Client(Protocol):
        """The caller's client as the broker reaches it: one step asked, its answer (or its error raised)."""

        def ask(self, put: dict[str, object], data: bytes = b"") -> object: ...

    class Dest(Protocol):
        """Where a fetch writes: a `Place` here, or the client's through the broker (`Handed`)."""

        path: Path

        def __enter__(self) -> Dest: ...
        def __exit__(self, *_: object) -> None: ...
        def resume(self, rel: str) -> int: ...
        def append(self, rel: str, offset: int, data: bytes) -> None: ...
        def finish(self, rel: str, size: int) -> None: ...
        def put(self, rel: str, data: bytes) -> None: ...
        def digest(self, rel: str) -> tuple[str, int]: ...
        def there(self, name: str, manifest: str | None) -> bool: ...
        def present(self, names: list[str]) -> list[str]: ...
        def fetched(self, jobs: dict[str, str]) -> dict[str, str]: ...
        def promote(self, rel: str, name: str) -> None: ...
        def remove(self, name: str) -> None: ...
        def close(self) -> None: ...


PART = ".rsk-part"  # a file being fetched: PATH.rsk-part, renamed to PATH when whole
MANIFEST = ".rsk-manifest"  # a result's manifest, in the result's directory
JOB_LABEL = ".rsk-job"  # the job whose result a fetched directory holds (written last of it, by a fetch)


def kept_out() -> frozenset[tuple[int, int]]:
    """The directories a fetch never writes into, nor below, by dev and inode (ADR 0065): rsk's state (RSK_HOME),
    its configuration (the targets directories with it), RSK_TARGETS_PATH's directories and ~/.ssh, as this
    process finds them. Checked on each directory the walk opens, so no spelling of a path, link or bind mount
    reaches them; one that does not exist yet is not there to protect."""
    from rsk.local.paths import config_dir, rsk_home, search_dirs, ssh_dir

    paths = [config_dir(), ssh_dir()]
    with suppress(RskError):  # a relative RSK_HOME or RSK_TARGETS_PATH is refused where rsk reads it
        paths.append(rsk_home())
    with suppress(RskError):
        paths += search_dirs()
    kept: set[tuple[int, int]] = set()
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            kept.add((st.st_dev, st.st_ino))
    return frozenset(kept)


class Place:
    """A directory a fetch writes into, opened (and made) at its first step from `/` without following a link, so
    a fetch that finds nothing makes nothing; every name below it is reached through its descriptor, one at a time
    (rsk.local.nolink). `rel` is a relative path of names rsk fetches (rsk.ops.fetch checked them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._dir: Dir | None = None

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._dir is not None:
            self._dir.close()
            self._dir = None

    def _top(self) -> Dir:
        if self._dir is None:
            self._dir = Dir.open(self.path, create=True, keep_out=kept_out())
        return self._dir

    def _in(self, rel: str, create: bool = True) -> AbstractContextManager[tuple[Dir, str]]:
        """The directory that holds `rel`'s last name (made on the way, with `create`), and that name."""
        from contextlib import contextmanager

        @contextmanager
        def opened() -> Iterator[tuple[Dir, str]]:
            head, _, name = rel.rpartition("/")
            top = self._top()
            if not head:
                yield top, name
                return
            with top.sub(head, create=create) as where:
                yield where, name

        return opened()

    # a file, in pieces: PATH.rsk-part grows, and becomes PATH by one rename ---------------------------------
    def resume(self, rel: str) -> int:
        """How many bytes of `rel` an earlier fetch left in its part (made empty when there is none)."""
        with self._in(rel) as (where, name):
            fh, have = where.open_to_write(name + PART)
            fh.close()
            return have

    def append(self, rel: str, offset: int, data: bytes) -> None:
        """`data` at `offset` of `rel`'s part, which is cut there first (the whole blocks before it stay)."""
        with self._part(rel, offset) as (_, _, fh):
            fh.seek(offset)
            fh.write(data)

    def finish(self, rel: str, size: int) -> None:
        """`rel`'s part, cut to `size` bytes, becomes `rel` by one rename."""
        with self._part(rel, size) as (where, name, _):
            where.rename(name + PART, where, name)

    def _part(self, rel: str, cut: int) -> AbstractContextManager[tuple[Dir, str, BinaryIO]]:
        """`rel`'s part, open to write and cut to `cut` bytes, which it must hold already (else it changed under
        the fetch), and the directory that holds it."""
        from contextlib import contextmanager

        @contextmanager
        def opened() -> Iterator[tuple[Dir, str, BinaryIO]]:
            with self._in(rel) as (where, name):
                fh, have = where.open_to_write(name + PART)
                with fh:
                    if cut > have:
                        raise StateError(f"{where.path / (name + PART)} changed during the fetch: nothing more was "
                                         "written", "run the same command again")  # fmt: skip
                    fh.truncate(cut)
                    yield where, name, fh

        return opened()

    # whole files, and a result's stage ----------------------------------------------------------------------
    def put(self, rel: str, data: bytes) -> None:
        """`rel` holds `data`: a new file renamed into place (a cut fetch's part of it is removed)."""
        with self._in(rel) as (where, name):
            where.remove_tree(name + PART)
            where.write(name, data)

    def digest(self, rel: str) -> tuple[str, int]:
        """The sha256 and size of the file `rel`, from one open."""
        with self._in(rel, create=False) as (where, name):
            return where.sha256(name)

    def there(self, name: str, manifest: str | None) -> bool:
        """Whether `name` here already holds this very result (its manifest is `manifest`); False when nothing is
        there. A link there, or anything else (any directory, for a stage without a manifest), is refused."""
        top = self._top()
        found = top.lookup(name)
        if found is None:
            return False
        shown = self.path / name
        if stat.S_ISLNK(found.st_mode):
            raise LinkRefused(f"{shown} is a symbolic link: refused, nothing was written there", LINK_HINT)
        if manifest is not None and stat.S_ISDIR(found.st_mode):
            with top.sub(name) as held:
                label = held.lookup(MANIFEST)
                if label is not None and stat.S_ISREG(label.st_mode) and held.read(MANIFEST) == manifest.encode():
                    return True
            raise UsageError(f"{shown} exists", "a result appears whole in a directory that does not exist yet")
        raise UsageError(f"{shown} exists", "give --to a directory that does not exist yet")

    def present(self, names: list[str]) -> list[str]:
        """Which of these names exist here (a link counts: what is there is refused when it is used). Nothing is
        made: a directory that does not exist holds none of them."""
        try:
            top = self._dir if self._dir is not None else Dir.open(self.path, keep_out=kept_out())
        except Missing:
            return []
        self._dir = top
        return [n for n in names if top.lookup(n) is not None]

    def fetched(self, jobs: dict[str, str]) -> dict[str, str]:
        """Of these names (name -> job), those that hold that job's result as a fetch left it (a directory whose
        regular `.rsk-job` names the job, and its `.rsk-manifest`, checked when it was fetched): name -> the
        manifest's text. A result is published once, so a later batch fetch asks the cluster nothing of them."""
        try:
            top = self._dir if self._dir is not None else Dir.open(self.path, keep_out=kept_out())
        except Missing:
            return {}
        self._dir = top
        out: dict[str, str] = {}
        for name, job in jobs.items():
            found = top.lookup(name)
            if found is None or not stat.S_ISDIR(found.st_mode):
                continue
            with top.sub(name) as held:
                labels = [held.lookup(n) for n in (JOB_LABEL, MANIFEST)]
                if all(x is not None and stat.S_ISREG(x.st_mode) for x in labels) and held.read(JOB_LABEL) == (
                    f"{job}\n".encode()
                ):
                    out[name] = held.read(MANIFEST).decode("utf-8", "replace")
        return out

    def regular(self, names: list[str]) -> list[str]:
        """Which of these paths, relative to this directory, are regular files (a look as this process's user, which
        is the caller: rsk.local.unsent). Nothing is opened or made."""
        found: list[str] = []
        for name in names:
            with suppress(OSError, ValueError):
                if stat.S_ISREG((self.path / name).stat().st_mode):
                    found.append(name)
        return found

    def promote(self, rel: str, name: str) -> None:
        """`rel` (below this directory) becomes `name` here, by one rename: a result appears whole."""
        with self._in(rel, create=False) as (where, last):
            where.rename(last, self._top(), name)

    def remove(self, name: str) -> None:
        self._top().remove_tree(name)


class Handed:
    """A `Place` of the caller's, in the broker: each step is done by the caller's client, as the caller (`serve`),
    and its answer or error comes back (ADR 0065). The broker itself never opens the path."""

    def __init__(self, client: Client, path: Path) -> None:
        self.client = client
        self.path = path

    def __enter__(self) -> Handed:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _ask(self, op: str, *args: object, data: bytes = b"") -> object:
        return self.client.ask({"op": op, "to": str(self.path), "args": list(args)}, data)

    def resume(self, rel: str) -> int:
        have = self._ask("resume", rel)
        return have if isinstance(have, int) and have >= 0 else 0

    def append(self, rel: str, offset: int, data: bytes) -> None:
        self._ask("append", rel, offset, data=data)

    def finish(self, rel: str, size: int) -> None:
        self._ask("finish", rel, size)

    def put(self, rel: str, data: bytes) -> None:
        self._ask("put", rel, data=data)

    def digest(self, rel: str) -> tuple[str, int]:
        got = self._ask("digest", rel)
        if not (isinstance(got, list) and len(got) == 2 and isinstance(got[0], str) and isinstance(got[1], int)):
            return ("", -1)  # no digest: it matches no manifest line
        return got[0], got[1]

    def there(self, name: str, manifest: str | None) -> bool:
        return self._ask("there", name, manifest) is True

    def present(self, names: list[str]) -> list[str]:
        got = self._ask("present", names)
        return [n for n in got if isinstance(n, str)] if isinstance(got, list) else []

    def fetched(self, jobs: dict[str, str]) -> dict[str, str]:
        got = self._ask("fetched", jobs)
        if not isinstance(got, dict):
            return {}
        return {n: t for n, t in got.items() if isinstance(n, str) and isinstance(t, str) and n in jobs}

    def regular(self, names: list[str]) -> list[str]:
        got = self._ask("regular", names)
        asked = set(names)  # (the client names only words it was asked, each once)
        return list(dict.fromkeys(n for n in got if isinstance(n, str) and n in asked)) if isinstance(got, list) else []

    def promote(self, rel: str, name: str) -> None:
        self._ask("promote", rel, name)

    def remove(self, name: str) -> None:
        self._ask("remove", name)

    def close(self) -> None:
        pass  # the client closes its places when the command ends


def serve(put: dict[str, object], data: bytes, places: dict[str, Place]) -> dict[str, object]:
    """One step a brokered command asked of this client (`Handed`), done here as this process's user on its own
    `Place` (kept in `places` for the rest of the command): `{"ok": answer}` or `{"error": the error's JSON}`."""
    to = put.get("to")
    try:
        op, args = put.get("op"), put.get("args")
        if not isinstance(to, str) or not isinstance(args, list):
            raise ValueError("no directory or arguments")
        place = places.get(to)
        if place is None:
            place = places[to] = Place(Path(to))
        if op == "resume":
            return {"ok": place.resume(str(args[0]))}
        if op == "append":
            place.append(str(args[0]), int(args[1]), data)
        elif op == "finish":
            place.finish(str(args[0]), int(args[1]))
        elif op == "put":
            place.put(str(args[0]), data)
        elif op == "digest":
            return {"ok": list(place.digest(str(args[0])))}
        elif op == "there":
            return {"ok": place.there(str(args[0]), None if args[1] is None else str(args[1]))}
        elif op == "present":
            return {"ok": place.present([str(n) for n in args[0]])}
        elif op == "regular":
            return {"ok": place.regular([str(n) for n in args[0]])}
        elif op == "fetched":
            return {"ok": place.fetched({str(n): str(j) for n, j in dict(args[0]).items()})}
        elif op == "promote":
            place.promote(str(args[0]), str(args[1]))
        elif op == "remove":
            place.remove(str(args[0]))
        else:
            raise ValueError(f"no step {op!r}")
        return {"ok": None}
    except RskError as exc:
        return {"error": exc.to_json()}
    except OSError as exc:
        return {"error": UsageError(f"cannot write in {to}: {exc.strerror or exc}",
                                    "check the path and its permissions").to_json()}  # fmt: skip
    except (ValueError, TypeError, IndexError) as exc:
        said = RskError(f"this client cannot do what the broker asked ({exc}); nothing was written",
                        "use the same rsk for the client and the broker")  # fmt: skip
        return {"error": said.to_json()}


def answer(got: object) -> object:
    """What the client answered a step (`serve`): its value, or its error raised here, in the broker."""
    if isinstance(got, dict) and "ok" in got:
        return got["ok"]
    if isinstance(got, dict) and isinstance(got.get("error"), dict):
        raise from_json(got["error"])
    raise StateError("the client's answer is not one rsk's client gives", "use rsk's own client")


# --code, read by the caller's client -----------------------------------------------------------------------
def code_entry(top: Dir, rel: str) -> os.stat_result | None:
    """What `--code` takes of `rel` below `top` (its lstat, no link followed on the way): a regular file whose name
    travels; None when nothing is there (a file git knows that was deleted). A link, or a name that cannot
    travel, is refused (rsk copies regular files only)."""
    found = top.lookup(rel)
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise UsageError(f"--code: {rel} is a symlink", "rsk copies regular files only: exclude it (--exclude)")
    if found is None or not stat.S_ISREG(found.st_mode):
        return None
    if not travels(rel):
        raise UsageError(
            f"--code: the file name {rel!r} cannot travel",
            "names are A-Z a-z 0-9 . _ + @ : , - and /; rename the file or exclude it (--exclude)",
        )
    return found


def check_bounds(root: Path, sizes: dict[str, int], max_bytes: int = MAX_BYTES) -> None:
    """A snapshot holds at most MAX_FILES files and `max_bytes` bytes."""
    if len(sizes) > MAX_FILES:
        raise UsageError(f"--code {root} holds {len(sizes)} files, more than the {MAX_FILES} a snapshot may hold",
                         "exclude data and build outputs (--exclude PATTERN)")  # fmt: skip
    total = sum(sizes.values())
    if total > max_bytes:
        big = ", ".join(f"{p} ({n // 1024} KiB)" for p, n in sorted(sizes.items(), key=lambda x: -x[1])[:5])
        raise UsageError(
            f"--code {root} holds {total // (1024 * 1024)} MiB, more than the {max_bytes // (1024 * 1024)} MiB cap",
            f"exclude data and build outputs (--exclude PATTERN); the largest: {big}",
        )


class CodeFiles:
    """`--code ROOT`'s files as this process's user reads them, for a brokered command: listed first (name, size,
    executable), then sent one after another, each opened from ROOT without following a link, as
    rsk.request.code.snapshot reads them without a broker. What the snapshot would refuse is refused here with
    its words (UsageError), before anything is sent."""

    def __init__(self, root: str, excludes: list[str]) -> None:
        self.root = Path(os.path.normpath(root))
        self.excludes = excludes
        self.files: list[tuple[str, int, bool]] = []
        self._top: Dir | None = None

    def close(self) -> None:
        if self._top is not None:
            self._top.close()
            self._top = None

    def listing(self) -> list[list[object]]:
        try:
            self._top = Dir.open(self.root)
        except Missing:
            raise UsageError(f"--code {self.root} is not a directory") from None
        for rel in selected(str(self.root), self.excludes):  # git's view, as this user
            if code_entry(self._top, rel) is None:
                continue
            with self._top.open_to_read(rel) as fh:  # readable, and its size and mode as opened
                st = os.fstat(fh.fileno())
            self.files.append((rel, st.st_size, bool(st.st_mode & stat.S_IXUSR)))
        check_bounds(self.root, {rel: size for rel, size, _ in self.files})
        return [[rel, size, x] for rel, size, x in self.files]

    def send(self, write: Callable[[bytes], object]) -> None:
        """Each listed file's bytes, in the listing's order; a file that changed since it was listed stops it."""
        assert self._top is not None
        for rel, size, _ in self.files:
            with self._top.open_to_read(rel) as fh:
                left = size if os.fstat(fh.fileno()).st_size == size else -1
                while left > 0:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    write(chunk)
                    left -= len(chunk)
            if left != 0:
                raise UsageError(f"--code: {rel} changed while it was sent; nothing was done", "send it again")
