"""Cards filed by hand for the page's tests (no cluster): a plan with agent text chosen by the test."""

from __future__ import annotations

from rsk.ledger.models import Card, CardPlan, CardTask
from rsk.ledger.store import Store

XSS = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


def file_card(project: str, card_id: str = "c-0123456789ab", *, argv: list[str] | None = None,
              plan_hash: str = "h" * 64, requester: str = "agent", tasks: list[CardTask] | None = None,
              script: str | None = None, env: list[str] | None = None) -> Card:  # fmt: skip
    plan = CardPlan(
        target="lab", cluster="lab-cluster", user="rsklab", command=" ".join(argv or ["true"]), argv=argv or ["true"],
        kind="batch" if tasks else "script" if script is not None else "argv", workdir="/work", partition="cpu",
        account="", qos="", nodes=1, cpus=2, mem_mb=100, gpus=1, time_min=10, gpu_hours=0.17, cpu_hours=0.33,
        estimate_start="now", policy_verdict="allow", policy_reasons=[], tasks=tasks or [], script=script,
        env=env or [], jobs=len(tasks) if tasks else 1,
    )  # fmt: skip
    card = Card(id=card_id, plan_hash=plan_hash, request_id="r-1", requester=requester, target="lab",
                request={"project": project}, plan=plan)  # fmt: skip
    with Store(project).transaction() as ledger:
        ledger.cards.append(card)
    return card
