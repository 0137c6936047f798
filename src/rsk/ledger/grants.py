"""Standing grants and deny rules: what humans set up ahead of time."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.errors import UsageError
from rsk.ledger.cards import human_entry
from rsk.ledger.decide import Usage, usage_by_grant
from rsk.ledger.models import Charge, DenyRule, Grant, now, stand_in_open
from rsk.ledger.store import Store


class StandIns(BaseModel):
    """A request's tasks no job was found for since its answer was lost, held at their worst case (docs/ledger.md)."""

    model_config = ConfigDict(extra="forbid")

    request_id: str
    target: str
    count: int


class GrantView(BaseModel):
    """A grant with what it has spent, reserved and has left."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    grant: Grant
    status: str
    jobs_spent: int
    jobs_reserved: int
    jobs_left: int | None
    gpu_hours_spent: float
    gpu_hours_reserved: float
    gpu_hours_left: float | None
    cpu_hours_spent: float
    cpu_hours_reserved: float
    cpu_hours_left: float | None
    jobs_at_worst: int = 0  # ended jobs charged their worst case
    note: str = ""
    # lost answers' tasks no job was found for, held at their worst case (`rsk grant release` if they never ran)
    stand_ins: list[StandIns] = []


class GrantList(BaseModel):
    """`rsk grant list --json`: a project's grants, each with what it spent, reserved and has left."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str
    grants: list[GrantView]


class RuleList(BaseModel):
    """`rsk deny-rule list --json`."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str
    rules: list[DenyRule]


class RuleAnswer(BaseModel):
    """`rsk deny-rule add|remove --json`: the rule, and what was done with it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str
    status: Literal["added", "removed"]
    rule: DenyRule


def scope_text(g: Grant) -> str:
    """Where a grant applies, in words (the CLI's grant list and the page say it the same way)."""
    parts = (
        f"targets {','.join(g.targets)}" if g.targets else "any target",
        f"partitions {','.join(g.partitions)}" if g.partitions else "",
        f"accounts {','.join(g.accounts)}" if g.accounts else "",
        f"qos {','.join(g.qos)}" if g.qos else "",
    )
    return ", ".join(p for p in parts if p)


def ceilings_text(g: Grant) -> str:
    """A grant's per-job ceilings, in words ("none" without any)."""
    pairs = (("GPUs {}", g.max_gpus), ("CPUs {}", g.max_cpus), ("{} MB/node", g.max_mem_mb), ("nodes {}", g.max_nodes),
             ("time {} min", g.max_time_min))  # fmt: skip
    return ", ".join(form.format(value) for form, value in pairs if value is not None) or "none"


def view(g: Grant, u: Usage, at: datetime, held: list[StandIns] | None = None) -> GrantView:
    status = "active"
    if g.revoked is not None:
        status = "revoked"
    elif g.expires is not None and g.expires <= at:
        status = "expired"
    elif (g.jobs is not None and u.jobs >= g.jobs) or (g.cpu_hours is not None and u.cpu_hours >= g.cpu_hours):
        # no job fits any more (every job uses CPU time); GPU-hours spent (or a budget of 0: no GPUs) still leave
        # room for work without GPUs: the grant is active, with gpu_hours_left 0 (docs/adr/0070)
        status = "exhausted"
    return GrantView(
        grant=g,
        status=status,
        jobs_spent=u.jobs_spent,
        jobs_reserved=u.jobs_reserved,
        jobs_left=None if g.jobs is None else max(g.jobs - u.jobs, 0),
        gpu_hours_spent=round(u.gpu_hours_spent, 4),
        gpu_hours_reserved=round(u.gpu_hours_reserved, 4),
        gpu_hours_left=None if g.gpu_hours is None else round(max(g.gpu_hours - u.gpu_hours, 0.0), 4),
        cpu_hours_spent=round(u.cpu_hours_spent, 4),
        cpu_hours_reserved=round(u.cpu_hours_reserved, 4),
        cpu_hours_left=None if g.cpu_hours is None else round(max(g.cpu_hours - u.cpu_hours, 0.0), 4),
        jobs_at_worst=u.jobs_at_worst,
        note=f"{u.jobs_at_worst} job(s) settled at worst case: Slurm's record was gone" if u.jobs_at_worst else "",
        stand_ins=held or [],
    )


def stand_ins_by_grant(charges: list[Charge]) -> dict[str, list[StandIns]]:
    """Each grant's charges that hold stand-ins at their worst case (pure)."""
    out: dict[str, list[StandIns]] = {}
    for ch in charges:
        n = sum(stand_in_open(k, c) for k, c in ch.job_costs.items()) if ch.state == "submitted" else 0
        if n:
            out.setdefault(ch.grant_id, []).append(StandIns(request_id=ch.request_id, target=ch.target, count=n))
    return out


def add_grant(store: Store, grant: Grant) -> Grant:
    if grant.expires is not None and grant.expires <= now():
        raise UsageError("--expires is in the past", "give a duration such as 8h or 7d, or a future date")
    with store.transaction() as ledger:
        ledger.grants.append(grant)
    store.audit(human_entry(store.project, "grant-add", grant.created_by, rule=grant.id))
    return grant


def list_grants(store: Store, archived: bool = False) -> list[GrantView]:
    """The grants in the ledger; with `archived`, also those revoked or expired long enough ago to have
    moved to the archive (what they spent is what they carried there)."""
    ledger = store.load()
    grants = list(ledger.grants)
    if archived:
        hot = {g.id for g in grants}
        grants = [g for g in store.archive.grants() if g.id not in hot] + grants
    usage = usage_by_grant(ledger.charges, grants=grants)
    held = stand_ins_by_grant(ledger.charges)
    at = now()
    return [view(g, usage.get(g.id, Usage()), at, held.get(g.id)) for g in grants]


def show_grant(store: Store, grant_id: str) -> GrantView:
    for v in list_grants(store, archived=True):
        if v.grant.id == grant_id:
            return v
    raise UsageError(
        f"no grant {grant_id!r} in project {store.project}", "`rsk grant list` shows the grants", code="not-found"
    )


def revoke_grant(store: Store, grant_id: str, by: str) -> Grant:
    with store.transaction() as ledger:
        for g in ledger.grants:
            if g.id == grant_id:
                if g.revoked is not None:
                    raise UsageError(f"grant {grant_id} was already revoked at {g.revoked:%Y-%m-%d %H:%M}")
                g.revoked = now()
                break
        else:
            raise UsageError(
                f"no grant {grant_id!r} in project {store.project}", "`rsk grant list` shows them", code="not-found"
            )
    store.audit(human_entry(store.project, "grant-revoke", by, rule=grant_id))
    return g


def add_rule(store: Store, rule: DenyRule, by: str) -> DenyRule:
    with store.transaction() as ledger:
        ledger.deny_rules.append(rule)
    store.audit(human_entry(store.project, "deny-rule-add", by, rule=rule.id, detail=rule.reason))
    return rule


def list_rules(store: Store) -> list[DenyRule]:
    return store.load().deny_rules


def remove_rule(store: Store, rule_id: str, by: str) -> DenyRule:
    with store.transaction() as ledger:
        for i, r in enumerate(ledger.deny_rules):
            if r.id == rule_id:
                del ledger.deny_rules[i]
                break
        else:
            raise UsageError(
                f"no deny rule {rule_id!r} in project {store.project}", "`rsk deny-rule list`", code="not-found"
            )
    store.audit(human_entry(store.project, "deny-rule-remove", by, rule=rule_id))
    return r
