"""The ledger: one schema-versioned JSON document per project (models only; no I/O here)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LEDGER_SCHEMA = 1


def now() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DenyRule(Model):
    """Refuses every plan it matches (all given conditions must hold). A deny always wins."""

    id: str = Field(default_factory=lambda: new_id("d"))
    reason: str
    target: str | None = None
    partition: str | None = None
    account: str | None = None
    gpus_at_least: int | None = None  # total GPUs of the job
    nodes_at_least: int | None = None
    time_min_at_least: int | None = None
    gpu_hours_at_least: float | None = None
    command: str | None = None  # a glob matched against the command line
    expires: datetime | None = None
    created: datetime = Field(default_factory=now)


class Approval(Model):
    """A human's yes for one exact plan hash, for a number of uses, until an expiry."""

    id: str = Field(default_factory=lambda: new_id("a"))
    plan_hash: str
    uses_left: int = 1
    expires: datetime | None = None
    decided_by: str
    decided_at: datetime = Field(default_factory=now)
    note: str = ""
    card_id: str | None = None
    used_by: list[str] = []  # request ids that consumed a use (a retry of one does not use another)


class Grant(Model):
    """Standing permission: a scope, per-job ceilings, budgets and an expiry."""

    id: str = Field(default_factory=lambda: new_id("g"))
    targets: list[str] = []  # empty: any target
    partitions: list[str] = []
    accounts: list[str] = []
    max_gpus: int | None = None  # total GPUs of one job
    max_cpus: int | None = None  # total CPUs of one job
    max_mem_mb: int | None = None  # memory per node
    max_nodes: int | None = None
    max_time_min: int | None = None
    gpu_hours: float | None = None  # budgets over the grant's life; None: unlimited
    cpu_hours: float | None = None
    jobs: int | None = None
    max_active: int | None = None  # concurrent active rsk jobs of the project on the target
    expires: datetime | None = None
    revoked: datetime | None = None
    created: datetime = Field(default_factory=now)
    created_by: str = ""
    note: str = ""


class Charge(Model):
    """A plan's worst-case cost against a grant: reserved when allowed, then spent or released."""

    id: str = Field(default_factory=lambda: new_id("ch"))
    grant_id: str
    plan_hash: str
    request_id: str
    target: str
    gpu_hours: float
    cpu_hours: float
    jobs: int = 1
    state: Literal["reserved", "spent", "released"] = "reserved"
    job_id: str | None = None
    created: datetime = Field(default_factory=now)
    reason: str = ""


class CardPlan(Model):
    """What a human needs to read on a card."""

    target: str
    cluster: str
    user: str
    command: str
    argv: list[str]
    kind: str
    workdir: str
    partition: str
    account: str
    qos: str
    nodes: int
    cpus: int
    mem_mb: int
    gpus: int
    time_min: int
    env_names: list[str]
    gpu_hours: float
    cpu_hours: float
    jobs: int = 1
    estimate_start: str
    policy_verdict: str
    policy_reasons: list[str]


class Card(Model):
    """A pending question for a human: may this exact plan run?"""

    id: str = Field(default_factory=lambda: new_id("c"))
    plan_hash: str
    request_id: str
    requester: str
    status: Literal["pending", "approved", "denied"] = "pending"
    created: datetime = Field(default_factory=now)
    target: str
    request: dict[str, object]  # the Request, so `rsk wait` can continue the launch
    plan: CardPlan
    closest_grant: str | None = None
    closest_why: list[str] = []
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str = ""


class Ledger(Model):
    schema_version: int = LEDGER_SCHEMA
    project: str
    deny_rules: list[DenyRule] = []
    approvals: list[Approval] = []
    grants: list[Grant] = []
    charges: list[Charge] = []
    cards: list[Card] = []


class AuditEntry(Model):
    schema_version: int = LEDGER_SCHEMA
    t: datetime = Field(default_factory=now)
    project: str
    event: str  # decision, approve, deny, grant-add, grant-revoke, charge-spent, charge-released, ...
    plan_hash: str | None = None
    request_id: str | None = None
    rule: str | None = None  # the id of what decided
    detail: str = ""
    by: str = ""
