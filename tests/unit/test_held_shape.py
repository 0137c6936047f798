"""What Slurm holds for a job against what the ledger decided (docs/adr/0041): a job of the account can raise a
pending job's GPUs (by any spelling), CPUs and nodes, and move it to another partition, account or QOS. Status
charges the worst case at Slurm's shape when it is more than the ledger's, whatever the job's journal says its
plan was, and flags a job outside the scope that allowed it. The cluster is a stand-in answering a status call
(the real one: tests/integration/test_guard.py and tests/shell/ops.bats); the ledger is real."""

from __future__ import annotations

from typing import cast

from rsk.cluster.remote import Remote
from rsk.ledger import guard
from rsk.ledger.models import Approval, Card, CardPlan, Charge, Grant, JobCost, Ledger, Use
from rsk.ledger.store import Store
from rsk.ops.status import status_call
from tests.unit.test_status_ledger import _Cluster

PROJECT = "p"
HOUR = JobCost(gpu_hours_worst=0.0, cpu_hours_worst=1.0)  # 1 CPU, no GPU, for 60 min at worst


def _books(partitions: list[str]) -> Grant:
    g = Grant(partitions=partitions, max_cpus=1, max_gpus=0)
    with Store(PROJECT).transaction() as ledger:
        ledger.grants.append(g)
        ledger.charges.append(Charge(grant_id=g.id, plan_hash="h", request_id="r1", target="lab", gpu_hours=0.0,
                                     cpu_hours=1.0, state="submitted", job_costs={"11": HOUR}))  # fmt: skip
    return g


def _status(row: str) -> tuple[list[str], str, str]:
    st, _ = status_call(cast(Remote, _Cluster(row)), "lab", PROJECT)
    [job] = st.jobs
    return st.warnings, job.slurm_holds, job.undecided


def test_a_job_raised_to_more_cpus_and_gpus_is_charged_what_slurm_holds_whatever_its_journal_claims() -> None:
    _books(["cpu"])
    # the job's journal line claims a plan of 4 CPUs and 3 GPUs (a job can write the journal): no flag from it,
    # but the ledger decided 1 CPU and no GPU, and Slurm holds 4 CPUs and 3 GPUs for its 60 min
    warnings, holds, _ = _status("job rid=r1 job=11 sq=PENDING sq_limit=3600 res=1,4,100,3,60 sq_shape=1,4,100,3 "
                                 "sq_part=cpu")  # fmt: skip
    assert "more than its decision counted" in holds
    assert any("11" in w and "charged for what Slurm holds" in w for w in warnings)
    ledger = Store(PROJECT).load()
    cost = ledger.charges[0].job_costs["11"]
    assert (cost.gpu_hours_worst, cost.cpu_hours_worst) == (3.0, 4.0)
    assert (ledger.charges[0].gpu_hours, ledger.charges[0].cpu_hours) == (3.0, 4.0)
    assert any(e.event == "charge-grown" and "4.0000 CPU-h" in e.detail for e in Store(PROJECT).read_audit())


def test_a_job_raised_past_its_plan_names_what_slurm_holds_against_the_plan() -> None:
    _books([])
    _, holds, _ = _status("job rid=r1 job=11 sq=PENDING sq_limit=3600 res=1,1,100,0,60 sq_shape=1,4,100,3 sq_part=gpu")
    assert holds == "holds 3 GPUs, its plan 0; 4 CPUs, its plan 1"


def test_a_job_at_its_plans_shape_is_neither_flagged_nor_charged_more_and_nothing_is_written() -> None:
    _books(["cpu"])
    before = Store(PROJECT).path.read_bytes()
    warnings, holds, undecided = _status("job rid=r1 job=11 sq=RUNNING sq_elapsed=5 sq_limit=3600 res=1,1,100,0,60 "
                                         "sq_shape=1,1,100,0 sq_part=cpu sq_account=(null) sq_qos=(null)")  # fmt: skip
    assert (warnings, holds, undecided) == ([], "", "")
    assert Store(PROJECT).path.read_bytes() == before


def test_a_job_moved_out_of_its_grants_partitions_is_flagged_like_an_undecided_step() -> None:
    g = _books(["cpu"])
    warnings, _, undecided = _status("job rid=r1 job=11 sq=PENDING sq_limit=3600 res=1,1,100,0,60 "
                                     "sq_shape=1,1,100,0 sq_part=gpu")  # fmt: skip
    assert undecided == f"partition gpu is not in grant {g.id}'s cpu"
    assert any("left the scope that allowed it" in w and "rsk cancel 11" in w for w in warnings)


def test_the_scope_of_a_grant_or_an_approved_plan_is_what_a_job_is_compared_with() -> None:
    g = Grant(partitions=["cpu"], accounts=["a"], qos=[])
    open_grant = Grant()
    plan = CardPlan(target="lab", cluster="c", user="u", command="true", argv=["true"], kind="argv", workdir="/",
                    partition="cpu", account="", qos="normal", nodes=1, cpus=1, mem_mb=1, gpus=0, time_min=1,
                    gpu_hours=0.0, cpu_hours=1.0, estimate_start="now", policy_verdict="ask",
                    policy_reasons=[])  # fmt: skip
    card = Card(plan_hash="h", request_id="r3", requester="agent", status="approved", target="lab", request={},
                plan=plan)  # fmt: skip
    ledger = Ledger(
        project=PROJECT,
        grants=[g, open_grant],
        charges=[
            Charge(grant_id=g.id, plan_hash="h", request_id="r1", target="lab", gpu_hours=0, cpu_hours=1,
                   state="submitted", job_costs={"1": HOUR}),
            Charge(grant_id=open_grant.id, plan_hash="h", request_id="r2", target="lab", gpu_hours=0, cpu_hours=1,
                   state="submitted", job_costs={"2": HOUR}),
        ],
        approvals=[Approval(plan_hash="h", decided_by="human", card_id=card.id,
                            uses=[Use(request_id="r3", target="lab", state="submitted", jobs={"3": HOUR})])],
        cards=[card],
    )  # fmt: skip
    assert guard.left_scope(ledger, "lab", "1", "cpu", "a", "(null)") == ""
    assert guard.left_scope(ledger, "lab", "1", "cpu,gpu", "a", "") == f"partition gpu is not in grant {g.id}'s cpu"
    assert guard.left_scope(ledger, "lab", "1", "cpu", "(null)", "") == f"account (none) is not in grant {g.id}'s a"
    assert guard.left_scope(ledger, "lab", "2", "gpu", "b", "high") == ""  # a grant of any partition
    assert guard.left_scope(ledger, "lab", "3", "cpu", "x", "normal") == ""  # the plan named no account
    assert "partition gpu" in guard.left_scope(ledger, "lab", "3", "gpu", "x", "normal")
    assert "qos high" in guard.left_scope(ledger, "lab", "3", "cpu", "x", "high")
    assert guard.left_scope(ledger, "other", "1", "gpu", "", "") == ""  # another target's job: not this one


def test_a_job_that_ended_outside_its_scope_is_flagged_in_the_read_that_settles_it() -> None:
    g = _books(["cpu"])
    _, _, undecided = _status("job rid=r1 job=11 sq=COMPLETED sq_elapsed=60 sq_limit=3600 res=1,1,100,0,60 "
                              "sq_shape=1,1,100,0 sq_part=gpu")  # fmt: skip
    assert undecided == f"partition gpu is not in grant {g.id}'s cpu"
    assert [c.job_costs["11"].cpu_hours_used for c in Store(PROJECT).archive.charges()] == [60 / 3600]


def test_a_job_whose_limit_was_raised_is_charged_its_run_time_at_its_shape_not_a_share_of_its_plan() -> None:
    _books(["cpu"])
    # planned for 60 min (1 CPU-h at worst); a job of the account raised its limit to 240 min while it pended
    warnings, holds, _ = _status("job rid=r1 job=11 sq=RUNNING sq_elapsed=60 sq_limit=14400 res=1,1,100,0,60 "
                                 "sq_shape=1,1,100,0 sq_part=cpu")  # fmt: skip
    assert holds == "holds a 14400 s limit, its plan 3600 s" and warnings
    assert Store(PROJECT).load().charges[0].job_costs["11"].cpu_hours_worst == 4.0
    # it ran 150 min: charged 150 min of 1 CPU, not 150/240 of its planned hour
    _status("job rid=r1 job=11 sq=COMPLETED sq_elapsed=9000 sq_limit=14400 res=1,1,100,0,60 sq_shape=1,1,100,0 "
            "sq_part=cpu")  # fmt: skip
    [settled] = Store(PROJECT).archive.charges()
    assert settled.job_costs["11"].cpu_hours_used == 2.5
