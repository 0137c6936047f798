"""Helpers for lab tests: grants, launches and waiting for jobs, all through the rsk command."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Ran, rsk


def grant(project: str, *options: str) -> dict[str, Any]:
    r = rsk("grant", "add", "--project", project, "--yes", "--json", *options)
    assert r.rc == 0, r.err
    return dict(json.loads(r.out))


def launch(project: str, *options: str, command: tuple[str, ...] = ("true",), env: dict[str, str] | None = None) -> Ran:
    return rsk("launch", "--target", "lab", "--project", project, "--json", *options, "--", *command, env=env)


def launched(r: Ran) -> dict[str, Any]:
    assert r.rc == 0, f"rc={r.rc}\n{r.out}\n{r.err}"
    return dict(json.loads(r.out))


def finished_output(project: str, job_id: str, stream: str = "stdout") -> dict[str, Any]:
    r = rsk("logs", job_id, "--target", "lab", "--project", project, "--stream", stream, "--follow",
            "--timeout", "120", "--json")  # fmt: skip
    assert r.rc == 0, r.err
    tail = dict(json.loads(r.out))
    assert tail["ended"], f"job {job_id} did not end in time: {tail}"
    return tail


def jfield(line: str, key: str) -> str | None:
    """The value of key=value in a journal line."""
    for word in line.split(" "):
        k, sep, v = word.partition("=")
        if sep and k == key:
            return v
    return None
