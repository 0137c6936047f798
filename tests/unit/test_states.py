"""Job states from raw facts (pure): what squeue, sacct, the run markers and the journal say."""

from __future__ import annotations

import pytest

from rsk.wire.states import Facts, Step, job_state, step_state, step_where


@pytest.mark.parametrize(
    ("facts", "state"),
    [
        (Facts(squeue="PENDING"), "pending"),
        (Facts(squeue="CONFIGURING"), "pending"),
        (Facts(squeue="PENDING", reason="PartitionTimeLimit"), "blocked"),  # Slurm's word: it never starts
        (Facts(squeue="PENDING", reason="QOSMaxWallDurationPerJobLimit"), "blocked"),
        (Facts(squeue="PENDING", reason="DependencyNeverSatisfied"), "blocked"),
        (Facts(squeue="PENDING", reason="Resources"), "pending"),  # clears by itself
        (Facts(squeue="PENDING", reason="QOSMaxJobsPerUserLimit"), "pending"),  # clears when others end
        (Facts(squeue="RUNNING", reason="PartitionTimeLimit"), "running"),
        (Facts(squeue="RUNNING"), "running"),
        (Facts(squeue="COMPLETING", rc=0), "running"),  # squeue first: still completing
        (Facts(squeue="TIMEOUT"), "timed-out"),
        (Facts(squeue="CANCELLED"), "cancelled"),
        (Facts(rc=0, signal="none"), "succeeded"),
        (Facts(rc=4, signal="none"), "failed"),
        (Facts(rc=143, signal="TERM", elapsed_s=10, limit_s=60), "cancelled"),
        (Facts(rc=143, signal="TERM", elapsed_s=58, limit_s=60), "timed-out"),  # a signal at the limit
        (Facts(sacct="COMPLETED"), "succeeded"),
        (Facts(sacct="OUT_OF_MEMORY"), "failed"),
        (Facts(sacct="CANCELLED"), "cancelled"),
        (Facts(sacct="NODE_FAIL"), "lost"),
        (Facts(squeue="COMPLETED"), "succeeded"),
        (Facts(squeue="FAILED"), "failed"),
        (Facts(squeue="NODE_FAIL"), "lost"),
        (Facts(slurm_up=False), "unknown"),
        (Facts(cancel_requested=True), "cancelled"),
        (Facts(), "lost"),  # Slurm forgot it and it left no marker
    ],
)
def test_job_state(facts: Facts, state: str) -> None:
    assert job_state(facts) == state


def test_markers_win_over_sacct_and_sacct_over_guessing() -> None:
    assert job_state(Facts(rc=0, signal="none", sacct="FAILED")) == "succeeded"
    assert job_state(Facts(sacct="TIMEOUT", cancel_requested=True)) == "timed-out"


def test_the_pending_reason_is_read_from_squeues_column() -> None:
    from rsk.wire.states import pending_reason

    assert pending_reason("(PartitionTimeLimit)") == "PartitionTimeLimit"
    assert pending_reason("(ReqNodeNotAvail,_UnavailableNodes:n9)") == "ReqNodeNotAvail"
    assert pending_reason("n1") == ""  # a running job's node list
    assert pending_reason("") == ""


def test_slurms_time_limit_wins_over_the_commands_exit_code_whoever_reports_it() -> None:
    """A command that exits 0 in the kill grace after its limit: timed-out from squeue and from sacct alike
    (before, the marker's rc=0 won once squeue forgot the job: the same job read succeeded later)."""
    marker = {"rc": 0, "signal": "none", "elapsed_s": 72, "limit_s": 60}
    assert job_state(Facts(squeue="TIMEOUT", **marker)) == "timed-out"
    assert job_state(Facts(sacct="TIMEOUT", **marker)) == "timed-out"
    assert job_state(Facts(sacct="COMPLETED", **marker)) == "succeeded"


def test_a_steps_queue_decides_until_it_has_run_then_its_markers_do() -> None:
    queued = Step(at="q", lease="ended")
    assert job_state(Facts(step=queued)) == "pending"
    assert step_where(queued, "") == "(LeaseEnded)"
    assert step_where(Step(at="q", lease="starting"), "") == "(Queued)"
    assert step_where(Step(at="q", lease="drained"), "") == "(LeaseDrained)"
    running = Step(at="run", lease="running")
    assert job_state(Facts(step=running)) == "running" and step_where(running, "n1") == "n1"
    # srun returned: the markers say how it ended, as for a job
    assert job_state(Facts(step=Step(at="run", lease="running", returned=True), rc=3, signal="none")) == "failed"
    # its allocation is gone and nothing says it ended: lost, never running
    assert job_state(Facts(step=Step(at="run", lease="ended"))) == "lost"
    assert job_state(Facts(step=Step(at="end", why="lease-closed"))) == "cancelled"
    assert job_state(Facts(step=Step(at="end", why="outlives-lease"))) == "failed"
    assert job_state(Facts(step=Step(at="end", why=""), rc=0, signal="none")) == "succeeded"
    assert step_state(Step(at="end", why="controller-lost")) is None


def test_a_links_end_that_its_wrapper_chose_waits_for_its_marker() -> None:
    """A chain's link exits 0 to end its chain and 75 to go on, whatever its command did: Slurm's COMPLETED or FAILED
    for it says which, not how the command ended. Without its marker (not written yet, or not yet seen on the login
    node) it is `ending`, never a guessed `failed` or `succeeded`; once Slurm forgot it with no marker, `lost`."""
    assert job_state(Facts(squeue="FAILED", elapsed_s=None, link=True)) == "ending"
    assert job_state(Facts(squeue="COMPLETED", link=True)) == "ending"
    assert job_state(Facts(sacct="FAILED", link=True)) == "lost"  # squeue forgot it: no marker will come now
    assert job_state(Facts(squeue="FAILED", rc=75, signal="none", stop="yielded", link=True)) == "stopped"
    assert job_state(Facts(squeue="COMPLETED", rc=3, signal="none", link=True)) == "failed"
    assert job_state(Facts(squeue="COMPLETED", rc=0, signal="none", link=True)) == "succeeded"
    # what Slurm ended itself is Slurm's word for a link too
    assert job_state(Facts(squeue="TIMEOUT", link=True)) == "timed-out"
    assert job_state(Facts(squeue="CANCELLED", link=True)) == "cancelled"
    assert job_state(Facts(squeue="OUT_OF_MEMORY", link=True)) == "failed"
    assert job_state(Facts(squeue="NODE_FAIL", link=True)) == "lost"
    # a job's wrapper exits with its command's code: Slurm's word is its outcome, the marker adds the code
    assert job_state(Facts(squeue="FAILED")) == "failed" and job_state(Facts(squeue="COMPLETED")) == "succeeded"


def test_slurms_end_states_read_the_same_from_squeue_and_sacct_and_sacct_guesses_nothing() -> None:
    for state in ("COMPLETED", "FAILED", "OUT_OF_MEMORY", "BOOT_FAIL", "NODE_FAIL", "TIMEOUT", "DEADLINE",
                  "CANCELLED", "PREEMPTED"):  # fmt: skip
        assert job_state(Facts(squeue=state)) == job_state(Facts(sacct=state)), state
    # sacct lags the controller (slurmdbd writes later): a state that says the job has not ended is no end
    assert job_state(Facts(sacct="COMPLETING")) == "running"
    assert job_state(Facts(sacct="REQUEUE_HOLD")) == "pending"
    assert job_state(Facts(sacct="SOMETHING_NEW")) == "unknown"
