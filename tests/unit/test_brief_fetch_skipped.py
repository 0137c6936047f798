"""A brief `rsk fetch --batch B PATH` answer (ADR 0073) puts first only the tasks with `missing` paths: a task whose
job left files rsk refused to fetch (`skipped`, names outside NAME_RULE) but missed nothing is cut like any complete
one when the batch has more than 50 tasks, and nothing in the answer counts it: the agent (and `rsk fetch --json` of
the human) reads every file as fetched. `missing` and `skipped` both say the destination lacks what the job made."""

from __future__ import annotations

from rsk.ops.fetch import BatchFetchReport, TaskFetch
from rsk.wire.states import SUMMARY_ROWS


def test_a_brief_batch_fetch_keeps_the_tasks_whose_files_were_left_out() -> None:
    tasks = [TaskFetch(task=f"k{i}", job_id=str(100 + i), state="succeeded", files=[], missing=[])
             for i in range(SUMMARY_ROWS + 10)]  # fmt: skip
    tasks[-1] = tasks[-1].model_copy(update={"skipped": ["out/\x1b]52;c;eA==\x07model.pt"]})
    report = BatchFetchReport(target="lab", project="p", batch="b", tasks=tasks, bytes=0)
    brief = report.brief(SUMMARY_ROWS)
    shown = [t.task for t in brief.tasks if t.skipped]
    assert shown == [tasks[-1].task], f"the brief answer hides that task {tasks[-1].task} left files out: {shown}"
