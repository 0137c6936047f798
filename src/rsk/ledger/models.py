"""The ledger: one schema-versioned JSON document per project (models only; no I/O here)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from rsk.wire.resources import Resources

# The ledger's shape. Every change of it bumps this, with a step in `migrate` and a fixture in tests/unit/ledgers/
# (tests/unit/test_ledger_schema.py holds each version's fingerprint): a reader refuses a newer ledger whole, so
# an added field is never read past by an rsk that does not know what it means (docs/adr/0044).
LEDGER_SCHEMA = 12
CARD_FILES = 1000  # a card lists at most this many of a snapshot's paths (the ledger is read on every launch)
CARD_TASKS = 100  # and this many of a batch's tasks; more are kept beside the ledger, in a file of their own (ADR 0060)
CARD_TASK_BYTES = 16 * 1024  # and as many of those as fit in this many bytes (ADR 0067)
CARD_MAX_BYTES = 256 * 1024  # a card larger than this in the ledger is refused (its script, argv, env: ADR 0067)
MAX_PENDING_CARDS = 20  # cards one OS user may have waiting in a project at once (ADR 0067)


def now() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str, nbytes: int = 4) -> str:
    return f"{prefix}-{secrets.token_hex(nbytes)}"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DenyRule(Model):
    """Refuses every plan it matches (all given conditions must hold). A deny always wins."""

    id: str = Field(default_factory=lambda: new_id("d"))
    reason: str
    target: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus_at_least: int | None = None  # total GPUs of the job
    nodes_at_least: int | None = None
    time_min_at_least: int | None = None
    gpu_hours_at_least: float | None = None
    command: str | None = None  # a glob matched against every task's command line and the script text
    expires: datetime | None = None
    created: datetime = Field(default_factory=now)


FILE = {"ledger-file": True}  # the context the ledger is written to its file in (rsk.ledger.store)


class JobCost(Model):
    """One submitted job of a charge or approval use: its worst case, and what it used once ended. In the ledger's
    file (context FILE) it leaves out the fields that hold their default: a batch of 10,000 jobs holds 10,000 of
    these, and the file is read on every launch (docs/adr/0060)."""

    gpu_hours_worst: float
    cpu_hours_worst: float
    gpu_hours_used: float | None = None  # set when the job has ended: Slurm's run time x its worst rate
    cpu_hours_used: float | None = None
    at_worst: bool = False  # settled at its worst case: Slurm's record of the job was gone
    never_ran: bool = False  # Slurm says it ended without ever starting (cancelled while pending): no job counts
    run_s: int | None = None  # its run time as Slurm reported it when it settled (None: Slurm's record was gone)

    # (no return annotation: pydantic would take it for the serialized shape, and the answers that hold a job's cost
    # would lose their keys; without one it keeps the model's)
    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):  # type: ignore[no-untyped-def]
        data: dict[str, object] = handler(self)
        if info.context != FILE:
            return data
        return {k: v for k, v in data.items() if v != _JOB_COST_DEFAULTS[k]}  # (the worst cases have no default)


_JOB_COST_DEFAULTS = {k: f.default for k, f in JobCost.model_fields.items()}
UNFOUND = "unfound:"  # a task of a plan whose job a lost answer's adoption did not see (docs/ledger.md)


def unfound(key: str) -> bool:
    """A charge's stand-in for a task of its plan no job was found for yet: counted at its worst case."""
    return key.startswith(UNFOUND)


def stand_in_open(key: str, cost: JobCost) -> bool:
    """A stand-in that still holds its task's worst case (not released by a human: `rsk grant release`)."""
    return unfound(key) and cost.gpu_hours_used is None


def released_stand_ins(costs: dict[str, JobCost]) -> bool:
    """Some stand-in of these costs was released by a human (its task never ran, on the human's word): a job found
    later for the request is still charged, so the entry stays in the hot ledger."""
    return any(unfound(k) and c.gpu_hours_used is not None for k, c in costs.items())


class CostTally(NamedTuple):
    """Jobs' costs split as the books read them: what ended is spent, what has not is still reserved."""

    gpu_spent: float
    cpu_spent: float
    gpu_reserved: float
    cpu_reserved: float
    at_worst: int  # of the spent ones, settled at their worst case


def tally(costs: Iterable[JobCost]) -> CostTally:
    """The one reading of a job's cost for grants' usage and approvals' totals alike."""
    gs = cs = gr = cr = 0.0
    worst = 0
    for c in costs:
        if c.gpu_hours_used is None or c.cpu_hours_used is None:
            gr, cr = gr + c.gpu_hours_worst, cr + c.cpu_hours_worst
        else:
            gs, cs, worst = gs + c.gpu_hours_used, cs + c.cpu_hours_used, worst + c.at_worst
    return CostTally(gs, cs, gr, cr, worst)


class Use(Model):
    """One request's use of an approval: held while it may still submit, then submitted or released."""

    request_id: str
    target: str
    state: Literal["held", "submitted", "released"] = "held"
    jobs: dict[str, JobCost] = {}
    at: datetime = Field(default_factory=now)
    submitted_at: datetime | None = None
    holders: list[str] = []  # the launches that hold it (rsk.ledger.attempts): given back only when none can submit
    max_running: int | None = None  # its plan's: at most this many of its jobs run at once (docs/adr/0059)


class Approval(Model):
    """A human's yes for one exact plan hash under the request id its card names, for a number of uses, until an
    expiry (docs/adr/0052). The card's request takes one use, kept for it until it does; uses beyond that one
    (`rsk approve --uses N`) let N-1 more launches of the same plan run under other request ids of the project."""

    id: str = Field(default_factory=lambda: new_id("a"))
    plan_hash: str
    uses_left: int = 1
    expires: datetime | None = None
    decided_by: str
    decided_at: datetime = Field(default_factory=now)
    note: str = ""
    card_id: str | None = None
    uses: list[Use] = []  # every request that took a use, kept for the audit and for replays
    request_id: str = ""  # the card's request: the one it allows ("": approved before schema 11, any request)

    def kept_for_card(self) -> bool:
        """Whether one of the uses left is the card's request's: it has not taken (or gave back) its use."""
        return bool(self.request_id) and not any(
            u.request_id == self.request_id and u.state != "released" for u in self.uses
        )

    def open_to(self, request_id: str) -> bool:
        """Whether this request may take a new use now: the card's own request while a use is left; another
        request of the plan only from the uses beyond the one kept for the card's request."""
        if not self.request_id or request_id == self.request_id:
            return self.uses_left > 0
        return self.uses_left > int(self.kept_for_card())


class Grant(Model):
    """Standing permission: a scope, per-job ceilings, budgets and an expiry."""

    id: str = Field(default_factory=lambda: new_id("g"))
    targets: list[str] = []  # empty: any target
    partitions: list[str] = []
    accounts: list[str] = []
    qos: list[str] = []
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
    # spent by this grant's settled charges that moved to the archive (rsk.ledger.archive): its budget counts them
    archived_jobs: int = 0
    archived_gpu_hours: float = 0.0
    archived_cpu_hours: float = 0.0
    archived_jobs_at_worst: int = 0  # of archived_jobs, those settled at worst case (Slurm's record was gone)


class Charge(Model):
    """A plan's cost against a grant: reserved at worst case when allowed; once submitted, each job
    holds its worst case until it ends and then counts what it used; released if nothing ran."""

    id: str = Field(default_factory=lambda: new_id("ch"))
    grant_id: str
    plan_hash: str
    request_id: str
    target: str
    gpu_hours: float  # the worst case of the whole plan
    cpu_hours: float
    jobs: int = 1
    state: Literal["reserved", "submitted", "settled", "released"] = "reserved"
    job_costs: dict[str, JobCost] = {}
    created: datetime = Field(default_factory=now)
    submitted_at: datetime | None = None
    reason: str = ""
    holders: list[str] = []  # the launches that hold it (rsk.ledger.attempts): given back only when none can submit
    max_running: int | None = None  # its plan's: at most this many of its jobs run at once (docs/adr/0059)

    @property
    def at_once(self) -> int:
        """How many of its jobs may be active at once, as --max-active counts them."""
        return min(self.jobs, self.max_running or self.jobs)


class CardTask(Model):
    key: str
    argv: list[str]
    env: list[str]
    nodes: int
    cpus: int
    mem_mb: int
    gpus: int
    time_min: int
    needs: list[str] = []  # a workflow's task: what it waits for, as the plan binds it (KEY:ok, KEY:any)

    @property
    def resources(self) -> Resources:
        return Resources(nodes=self.nodes, cpus=self.cpus, mem_mb=self.mem_mb, gpus=self.gpus, time_min=self.time_min)


class CardShape(Resources):
    """A batch's tasks of one shape: how many, and what each holds."""

    tasks: int


class CardPlan(Model):
    """What a human needs to read on a card: everything the plan hash binds."""

    target: str
    cluster: str
    user: str
    root: str = ""
    hostkey: str = ""
    command: str
    argv: list[str]
    kind: str
    workdir: str
    code: str = ""  # the digest of the code snapshot the job runs (a checked copy of it)
    code_files: list[str] = []  # that snapshot's paths (the first CARD_FILES), from the manifest that hashes to `code`
    code_count: int = 0  # how many files it holds in all
    code_bytes: int = 0  # and their total size
    path: str = ""
    partition: str
    account: str
    qos: str
    nodes: int
    cpus: int
    mem_mb: int
    gpus: int
    time_min: int
    env: list[str] = []  # NAME=VALUE, every one the job gets from the plan
    script: str | None = None
    tasks: list[CardTask] = []  # a batch: every task, or its first (CARD_TASKS, CARD_TASK_BYTES: tasks_file has all)
    tasks_digest: str = ""  # a batch: sha256 of all its tasks as the card lists them (rsk.ledger.cards.tasks_digest)
    shapes: list[CardShape] = []  # a batch: its tasks by shape, the most first
    max_running: int | None = None  # a batch: at most this many of its tasks run at once (docs/adr/0059)
    budget_min: int | None = None  # a chain: the run time its links share (its tasks are the links)
    signal_s: int | None = None  # a chain: SIGUSR1 this many seconds before each link's limit
    chain_of: str = ""  # an extension of this chain (`rsk extend`)
    link0: int | None = None  # an extension: the links the chain had before
    attempt_of: str = ""  # an attempt of this batch (`rsk retry`)
    lease_open: str = ""  # kind lease: the lease it opens (`lease` before schema 10)
    drain_min: int | None = None  # kind lease: no step starts in its last minutes
    overrun: str = ""  # kind lease: a step longer than what is left is refused or clipped
    gpu_hours: float
    cpu_hours: float
    jobs: int = 1
    estimate_start: str
    policy_verdict: str
    policy_reasons: list[str]

    @property
    def resources(self) -> Resources:
        """Per job: the largest task's (the whole plan's worst case is `gpu_hours` and `cpu_hours`, as filed)."""
        return Resources(nodes=self.nodes, cpus=self.cpus, mem_mb=self.mem_mb, gpus=self.gpus, time_min=self.time_min)

    def differs(self, other: CardPlan) -> tuple[list[str], list[str], list[str]]:
        """What another plan of the same request changes: the fields (argv, resources, env, code, ...), and the
        code files only one of the two lists (as far as the cards list them)."""
        fields = [k for k in _PLAN_FIELDS if getattr(self, k) != getattr(other, k)]
        if "code" in fields and self.code and other.code:  # the job's directory follows its snapshot
            fields = [k for k in fields if k != "workdir"]
        mine, theirs = set(self.code_files), set(other.code_files)
        return fields, sorted(theirs - mine), sorted(mine - theirs)

    def lease_terms(self) -> str:
        """A lease card's terms in words (the CLI's card and the page say the same); "" for any other."""
        if self.kind != "lease" or not self.lease_open:
            return ""
        longer = "clipped to what is left" if self.overrun == "clip" else "refused"
        return f"its steps share it; none starts in its last {self.drain_min} min; a longer step is {longer}"


# what a plan binds that an agent chooses (not the cluster's facts, estimates or costs that follow from them)
_PLAN_FIELDS = ("argv", "kind", "workdir", "code", "path", "partition", "account", "qos", "nodes", "cpus", "mem_mb",
                "gpus", "time_min", "env", "script", "tasks", "tasks_digest", "max_running", "budget_min", "signal_s",
                "chain_of", "link0", "attempt_of", "lease_open", "drain_min", "overrun")  # fmt: skip


def tell_human(card_id: str) -> str:
    """The sentence an agent passes on to the human, word for word, when a card waits for them."""
    return (
        f"rsk needs your approval for card {card_id}: `rsk approvals show {card_id}` shows what it runs and "
        f"costs; `rsk approve {card_id}` at your terminal allows it, `rsk deny {card_id} --reason ...` refuses it."
    )


class Card(Model):
    """A pending question for a human: may this exact plan run?"""

    id: str = Field(default_factory=lambda: new_id("c", 6))  # unique across projects: cards are found by id
    plan_hash: str
    request_id: str
    requester: str
    filed_by: str = ""  # the OS user who filed it, as rsk knows it (the broker: the socket's peer); "" before 0.5
    status: Literal["pending", "approved", "denied", "withdrawn"] = "pending"
    created: datetime = Field(default_factory=now)
    target: str
    request: dict[str, object]  # the Request, so `rsk wait` can continue the launch
    plan: CardPlan
    closest_grant: str | None = None
    closest_why: list[str] = []
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str = ""
    superseded_by: str = ""  # withdrawn by rsk: a grant or a spare approval use allowed its request (its wait goes on)
    # a batch of more than its card lists (CARD_TASKS, CARD_TASK_BYTES): the sha256 (and name) of the file beside
    # the ledger that holds every task, as its request asks them and as its plan runs them
    # (rsk.ledger.cards.card_tasks); `request` then holds none
    tasks_file: str = ""


class LeaseStep(Model):
    """A step the ledger allowed into a lease, as the cluster queued it: what a step the controller started
    is compared with (a step none of these names was never decided here)."""

    job_id: str  # LEASEJOBsSEQ
    request_id: str
    plan_hash: str
    task: str = ""
    at: datetime = Field(default_factory=now)


class Lease(Model):
    """A lease this project opened: its allocation was allowed (and charged) like any launch, so steps
    queued into it while it is open need no decision of their own beyond the deny rules."""

    id: str = Field(default_factory=lambda: new_id("l"))
    name: str
    target: str
    job_id: str  # the lease's Slurm job
    request_id: str
    plan_hash: str
    allowed_by: str  # "grant g-..." or "approval a-..."
    resources: Resources  # its allocation, as the plan asked (schema < 7: flat fields, nested by migrate)
    opened: datetime = Field(default_factory=now)
    closed: datetime | None = None
    closed_by: str = ""
    steps: list[LeaseStep] | None = []  # None: opened by an rsk that did not record its steps (schema < 5)


class Ledger(Model):
    schema_version: int = LEDGER_SCHEMA
    project: str
    deny_rules: list[DenyRule] = []
    approvals: list[Approval] = []
    grants: list[Grant] = []
    charges: list[Charge] = []
    cards: list[Card] = []
    leases: list[Lease] = []


class AuditEntry(Model):
    schema_version: int = LEDGER_SCHEMA
    t: datetime = Field(default_factory=now)
    project: str
    event: str  # decision, approve, deny, grant-add, grant-revoke, charge-submitted, charge-released, ...
    plan_hash: str | None = None
    request_id: str | None = None
    rule: str | None = None  # the id of what decided
    detail: str = ""
    by: str = ""
    tty: str | None = None  # a human act: the terminal it came from (None: no terminal)
    parents: list[str] = []  # a human act: the process chain that ran it, nearest first


def _dicts(value: object) -> list[dict[str, object]] | None:
    """A list of objects, else None (the validator then reports what is wrong)."""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [dict(v) for v in value]
    return None


_SHAPE = ("nodes", "cpus", "mem_mb", "gpus", "time_min")


def _nested(lease: dict[str, object]) -> dict[str, object]:
    """A lease of schema < 7: its flat shape fields become its `resources` (what is missing stays missing,
    for validation to refuse)."""
    if "resources" in lease:
        return lease
    shape = {k: lease[k] for k in _SHAPE if k in lease}
    return {**{k: v for k, v in lease.items() if k not in _SHAPE}, "resources": shape}


def _lease_open(card: dict[str, object]) -> dict[str, object]:
    """A card of schema < 10: its plan's `lease` (the lease a lease card opens) becomes `lease_open`."""
    plan = card.get("plan")
    if not isinstance(plan, dict) or "lease" not in plan:
        return card
    return {**card, "plan": {("lease_open" if k == "lease" else k): v for k, v in plan.items()}}


def _named(approval: dict[str, object], named: dict[object, object]) -> dict[str, object]:
    """An approval of schema < 11: the request its card names, when that card is at hand."""
    rid = named.get(approval.get("card_id"))
    return {**approval, "request_id": rid} if isinstance(rid, str) and "request_id" not in approval else approval


def migrate(raw: dict[str, object]) -> dict[str, object]:
    """An older ledger as the current schema, one version at a time. 11 -> 12: nothing moves (charges, approval uses
    and cards may say a batch's max running; a card of many tasks lists the first, the rest in a file). 10 -> 11: an
    approval names the request its
    card named, the one it allows (from its card, when the card is still in the ledger; else "", any request of
    the plan, as it was approved). 9 -> 10: a lease card's plan names the
    lease it opens `lease_open` (it was `lease`). 8 -> 9: a job cost says whether Slurm said it
    never started (none settled so far did) and its run time (not known for those). 7 -> 8: nothing moves (a
    version-7 ledger may hold fields added while 7 was current: cards' `filed_by` and `superseded_by`, a chain's and
    a lease's terms; from 8 on, every change of shape has its own version). 6 -> 7: a lease's shape nests as its
    `resources`. 5 -> 6: cards may list their code snapshot's files (older ones do not). 4 -> 5: leases record the
    steps they allowed (a lease opened before says it did not: None), and a job cost says whether it settled at
    worst case (none did). 3 -> 4: grants carry what their archived charges spent (nothing yet). 2 -> 3 adds leases
    (none). 1 -> 2: spent charges become submitted, approvals' used_by become uses, cards show env values. Anything
    malformed is left as it is for validation to refuse."""
    if raw.get("schema_version", 1) == 11:  # a batch's max running, a card's summary of many tasks: none before
        return {**raw, "schema_version": 12}
    if raw.get("schema_version", 1) == 10:
        cards, approvals = _dicts(raw.get("cards", [])), _dicts(raw.get("approvals", []))
        if cards is None or approvals is None:
            return raw
        named = {c.get("id"): c.get("request_id") for c in cards}
        return migrate({**raw, "schema_version": 11,
                        **({"approvals": [_named(a, named) for a in approvals]} if approvals else {})})  # fmt: skip
    if raw.get("schema_version", 1) == 9:
        cards = _dicts(raw.get("cards", []))
        if cards is None:
            return raw
        return migrate({**raw, "schema_version": 10, **({"cards": [_lease_open(c) for c in cards]} if cards else {})})
    if raw.get("schema_version", 1) == 8:
        return migrate({**raw, "schema_version": 9})
    if raw.get("schema_version", 1) == 7:
        return migrate({**raw, "schema_version": 8})
    if raw.get("schema_version", 1) == 6:
        leases = _dicts(raw.get("leases", []))
        if leases is None:
            return raw
        return migrate({**raw, "schema_version": 7, "leases": [_nested(x) for x in leases]})
    if raw.get("schema_version", 1) == 5:
        return migrate({**raw, "schema_version": 6})
    if raw.get("schema_version", 1) == 4:
        leases = _dicts(raw.get("leases", []))
        if leases is None:
            return raw
        return migrate({**raw, "schema_version": 5, "leases": [{**x, "steps": None} for x in leases]})
    if raw.get("schema_version", 1) == 3:
        return migrate({**raw, "schema_version": 4})
    if raw.get("schema_version", 1) == 2:
        return migrate({**raw, "schema_version": 3})
    if raw.get("schema_version", 1) != 1:
        return raw
    out = dict(raw)
    out["schema_version"] = 2
    charges = _dicts(raw.get("charges", []))
    if charges is not None:
        for ch in charges:
            job = ch.pop("job_id", None)
            if ch.get("state") == "spent" and isinstance(ch.get("gpu_hours"), int | float):
                ch["state"] = "submitted"
                jobs = [j for j in str(job or "").split(",") if j]
                n = max(len(jobs), 1)
                ch["job_costs"] = {
                    j: {"gpu_hours_worst": float(ch["gpu_hours"]) / n,  # type: ignore[arg-type]
                        "cpu_hours_worst": float(ch.get("cpu_hours", 0)) / n}  # type: ignore[arg-type]
                    for j in jobs
                }  # fmt: skip
        out["charges"] = charges
    approvals = _dicts(raw.get("approvals", []))
    if approvals is not None:
        for a in approvals:
            used = a.pop("used_by", [])
            if isinstance(used, list):
                a["uses"] = [{"request_id": str(r), "target": "", "state": "submitted"} for r in used]
        out["approvals"] = approvals
    cards = _dicts(raw.get("cards", []))
    if cards is not None:
        for c in cards:
            plan = c.get("plan")
            if isinstance(plan, dict):
                c["plan"] = {k: v for k, v in plan.items() if k != "env_names"}
        out["cards"] = cards
    return migrate(out)
