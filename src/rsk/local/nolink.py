"""Paths on this machine walked one name at a time, following no symbolic link (ADR 0055).

The human's rsk writes and reads in trees an agent may write too: its working tree, `rsk-results`, a `--to`
directory, a `--code` directory. A link placed there would turn rsk's write into one anywhere the human may
write (`~/.bashrc`, `~/.ssh`), and its read into one of the human's files. So such a path is opened from `/`,
one name at a time, each with O_NOFOLLOW (directories with O_DIRECTORY too), and everything done below it is
done through the directory's descriptor (`dir_fd`): no check before a use, and no name resolved twice. A link
anywhere on the way is refused (`link-refused`, exit 2); a file rsk writes into is one of its own user with
one name (a hard link to another file is refused the same way).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import BinaryIO

from rsk.errors import UsageError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO of the name never holds the command
LINK_HINT = (
    "in a tree an agent may write, rsk follows no link on the way to what it writes or reads, and writes only "
    "into files it made: name the directory by its real path, or remove what is in the way (docs/security.md)"
)


class LinkRefused(UsageError):
    code = "link-refused"


class Missing(UsageError):
    code = "not-found"


class KeptOut(UsageError):
    """A directory rsk never writes into for anyone (its own state and configuration, ~/.ssh), met on the way."""

    code = "rsk-own"


def _refusal(path: Path, what: str) -> LinkRefused:
    return LinkRefused(f"{path} is {what}: refused", LINK_HINT)


def _failed(path: Path, doing: str, exc: OSError) -> UsageError:
    return UsageError(f"cannot {doing} {path}: {exc.strerror or exc}", "check the path and its permissions")


def _parts(rel: str) -> list[str]:
    """The names of a relative path, `.` and empty ones left out (`..` stays: the real parent of a real
    directory, never a link's)."""
    return [p for p in rel.split("/") if p not in ("", ".")]


class Dir:
    """A directory held by its descriptor, reached from `/` without following a link. Close it (or use `with`)."""

    def __init__(self, fd: int, path: Path, keep_out: frozenset[tuple[int, int]] = frozenset()) -> None:
        self.fd = fd
        self.path = path
        self.keep_out = keep_out  # (st_dev, st_ino) of directories this walk never enters, nor anything below

    @classmethod
    def open(cls, path: Path, *, create: bool = False, keep_out: frozenset[tuple[int, int]] = frozenset()) -> Dir:
        """The directory at the absolute `path`, every name on the way opened without following a link (missing
        ones made, with `create`). With `keep_out`, every directory entered, from `/` down, is checked by its
        descriptor's dev and inode: one of them (a path to it, a bind mount of it) is refused (`KeptOut`)."""
        if not path.is_absolute():
            raise ValueError(f"not an absolute path: {path}")
        root = cls(os.open("/", _DIR), Path("/"), keep_out)
        with root:
            root._keep(root.fd, root.path)
            return root.sub(str(path)[1:], create=create)

    def _keep(self, fd: int, shown: Path) -> None:
        if self.keep_out:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in self.keep_out:
                raise KeptOut(f"{shown} is rsk's own state or configuration (or ~/.ssh): nothing is written there",
                              "fetch into a directory of your work; rsk's files change only through rsk")  # fmt: skip

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def sub(self, rel: str, *, create: bool = False) -> Dir:
        """The directory `rel` below this one (its names walked one at a time; made when missing, with `create`)."""
        fd, shown = os.dup(self.fd), self.path
        try:
            for name in _parts(rel):
                shown = shown / name
                nxt = self._enter(fd, name, shown, create)
                os.close(fd)
                fd = nxt
                self._keep(fd, shown)
        except BaseException:
            os.close(fd)
            raise
        return Dir(fd, shown, self.keep_out)

    @staticmethod
    def _enter(fd: int, name: str, shown: Path, create: bool) -> int:
        for attempt in (1, 2):
            try:
                return os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create or attempt == 2:
                    raise Missing(f"{shown} does not exist", "check the path") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)  # the umask's mode, as mkdir -p
            except OSError as exc:
                kind = _kind(fd, name) if exc.errno in (errno.ELOOP, errno.ENOTDIR) else ""
                if kind == "a symbolic link":
                    raise _refusal(shown, kind) from None
                if kind:
                    raise UsageError(f"{shown} is {kind}", "name a directory") from None
                raise _failed(shown, "open", exc) from None
        raise AssertionError("unreachable")

    def lookup(self, rel: str) -> os.stat_result | None:
        """What `rel` below this directory is (a link at its last name as a link; one on the way refused), or
        None when there is nothing (or no directory on the way to it)."""
        head, _, name = rel.rpartition("/")
        try:
            where = self.sub(head) if _parts(head) else self
        except LinkRefused:
            raise
        except UsageError:  # missing, not a directory, not readable: nothing is there for rsk
            return None
        try:
            return os.stat(name, dir_fd=where.fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            if where is not self:
                where.close()

    def _file(self, rel: str, flags: int, mode: int = 0o666) -> int:
        """A regular file at `rel` below this directory, opened with `flags`, no link followed on the way."""
        head, _, name = rel.rpartition("/")
        where = self.sub(head, create=bool(flags & os.O_CREAT)) if _parts(head) else self
        shown = where.path / name
        try:
            try:
                fd = os.open(name, flags | _FILE, mode, dir_fd=where.fd)
            except FileNotFoundError:
                raise Missing(f"{shown} does not exist", "check the path") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _refusal(shown, "a symbolic link") from None
                raise _failed(shown, "open", exc) from None
        finally:
            if where is not self:
                where.close()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _refusal(shown, "not a regular file")
        return fd

    def open_to_write(self, rel: str) -> tuple[BinaryIO, int]:
        """A file of this user's own, with one name, to write (made when missing), and its size: a file another
        user or another name shares is never written into (it would carry rsk's writes elsewhere)."""
        fd = self._file(rel, os.O_RDWR | os.O_CREAT)
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_nlink != 1:
            os.close(fd)
            raise _refusal(self.path / rel, "a file rsk did not make (another user's, or one with other names)")
        return os.fdopen(fd, "r+b"), st.st_size

    def read(self, rel: str) -> bytes:
        with self.open_to_read(rel) as fh:
            return fh.read()

    def open_to_read(self, rel: str) -> BinaryIO:
        """A regular file below this directory, open to read (no link followed on the way)."""
        return os.fdopen(self._file(rel, os.O_RDONLY), "rb")

    def read_with_mode(self, rel: str) -> tuple[bytes, int]:
        """The file's bytes and its mode, from one open."""
        with os.fdopen(self._file(rel, os.O_RDONLY), "rb") as fh:
            return fh.read(), os.fstat(fh.fileno()).st_mode

    def sha256(self, rel: str) -> tuple[str, int]:
        """The file's sha256 and size, from one open."""
        with os.fdopen(self._file(rel, os.O_RDONLY), "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest(), os.fstat(fh.fileno()).st_size

    def write(self, name: str, data: bytes) -> None:
        """The file `name` here holds `data`: a new file under a name no one could guess, renamed into place."""
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, 0o666, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            self.rename(tmp, self, name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    def rename(self, name: str, to: Dir, new: str) -> None:
        """Rename `name` here to `new` in `to` (a link at `new` is replaced, never followed)."""
        try:
            os.rename(name, new, src_dir_fd=self.fd, dst_dir_fd=to.fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise UsageError(f"{to.path / new} exists ({_kind(to.fd, new)}): nothing was put there",
                                 "name a place that does not exist yet") from None  # fmt: skip
            raise _failed(to.path / new, "write", exc) from None

    def remove_tree(self, name: str) -> None:
        """Remove `name` here and what it holds (a link is removed, never followed; errors are left)."""
        st = self.lookup(name)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=self.fd, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.fd)


def read_file(path: Path) -> bytes:
    """The file at the absolute `path`, reached from `/` without following a link."""
    with Dir.open(path.parent) as where:
        return where.read(path.name)


def _kind(fd: int, name: str) -> str:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return "gone"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return "a directory" if stat.S_ISDIR(st.st_mode) else "not a directory"
