"""The human's notification hook, run when a card is filed: a command, or a webhook URL.

Configured in $XDG_CONFIG_HOME/rsk/config.toml (the human's file; see INSTALL.md):

    [notify]
    command = "notify-send rsk \\"$RSK_CARD_SUMMARY\\""   # run by sh; the card as JSON on stdin
    url = "https://hooks.example.org/rsk"                  # POSTed the card as JSON

The hook runs detached: a slow or failing hook never blocks or fails a launch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.ledger.models import Card
from rsk.local.inert import inert
from rsk.local.paths import config_dir, rsk_home


class NotifyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    url: str | None = None


def load() -> NotifyConfig:
    path = config_dir() / "config.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")).get("notify", {})
        return NotifyConfig.model_validate(raw)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError, AttributeError):
        return NotifyConfig()


class PageFile(BaseModel):
    """Where the human's page (`rsk ui`) serves while it runs: $RSK_HOME/ui/page.json, written by rsk.ui.server
    (0600), read here so a notification can carry the card's address on it. No secret: the page needs its
    session cookie."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    address: str  # http://127.0.0.1:PORT/
    pid: int


def page_file() -> Path:
    return rsk_home() / "ui" / "page.json"


def page_address() -> str | None:
    """The running page's address, or None (no page, or its process is gone)."""
    try:
        page = PageFile.model_validate_json(page_file().read_bytes())
        os.kill(page.pid, 0)
    except (OSError, ValueError):
        return None
    return page.address if page.address.startswith("http://127.0.0.1:") else None


def _cut(text: str, at: int = 200) -> str:
    """A command for a one-line notice: cut where it is long, and saying so (the card shows it whole)."""
    return text if len(text) <= at else f"{text[:at]}... ({len(text) - at} more characters: see the card)"


def summary(card: Card, project: str) -> dict[str, object]:
    p = card.plan
    address = page_address()
    url = f"{address}#card-{card.id}" if address else None
    text = (
        f"rsk: card {card.id} in project {project} waits for you: {_cut(inert(p.command))} on {p.target} "
        f"({p.gpu_hours:.2f} GPU-h, {p.cpu_hours:.2f} CPU-h at worst). `rsk approvals show {card.id}`"
        + (f", or on the page: {url}" if url else "")
    )
    return {"schema_version": 1, "card_id": card.id, "project": project, "target": p.target,
            "requester_claim": card.requester, "filed_by": card.filed_by, "plan_hash": card.plan_hash,
            "gpu_hours": p.gpu_hours, "cpu_hours": p.cpu_hours, "summary": text, "page": url}  # fmt: skip


def card_filed(card: Card, project: str) -> None:
    """Run the configured hooks for a new card, detached; never raises."""
    cfg = load()
    if not cfg.command and not cfg.url:
        return
    data = summary(card, project)
    payload = json.dumps(data).encode()
    card_env = {"RSK_CARD_ID": card.id, "RSK_CARD_PROJECT": project, "RSK_CARD_SUMMARY": str(data["summary"]),
                "RSK_CARD_PAGE": str(data["page"] or "")}  # fmt: skip
    runs: list[tuple[list[str], dict[str, str], str | None]] = []
    if cfg.command:  # the human's own command, where the human's rsk runs
        runs.append((["/bin/sh", "-c", cfg.command], {**os.environ, **card_env}, None))
    if cfg.url:  # rsk's own code: never a module from the working directory (an agent's tree)
        from rsk.local.child import python

        argv, env = python("rsk.ledger.notify", cfg.url)
        runs.append((argv, {**env, **card_env}, "/"))
    for argv, env, cwd in runs:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=env, cwd=cwd, start_new_session=True)  # fmt: skip
            assert proc.stdin is not None
            proc.stdin.write(payload)
            proc.stdin.close()
        except (OSError, ValueError):
            continue


def _post(url: str) -> None:  # the detached child of card_filed
    request = urllib.request.Request(url, data=sys.stdin.buffer.read(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).close()


if __name__ == "__main__":
    _post(sys.argv[1])
