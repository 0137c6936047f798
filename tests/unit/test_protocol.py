from __future__ import annotations

import pytest

from rsk.errors import CapReached, ConflictError, DeniedError, ProtocolError, UsageError
from rsk.wire import answers
from rsk.wire.protocol import Output, Request, b64, parse, plan_hash, raise_for_error, unb64

N = "0123456789abcdef0123456789abcdef"


def framed(text: str) -> str:
    """Lines starting with @@ become this call's framed lines."""
    return "\n".join(line.replace("@@", f"@@{N} ", 1) if line.startswith("@@") else line for line in text.split("\n"))


def parse_framed(text: str) -> Output:
    out = parse(framed(text), N)
    if out is None:
        raise ProtocolError("cut short")
    return out


def plan_output(lines: list[tuple[str, str]], printed: str | None = None, extra: str = "") -> str:
    body = "".join(f"@@planline {k} {v}\n" for k, v in lines)
    return f"Welcome to the cluster!\n{body}@@plan {printed or plan_hash(lines)}\n{extra}@@done rc=0\n"


FIELDS = [
    ("protocol", b64("2")), ("cluster", b64("c")), ("user", b64("u")), ("root", "=/home/u/.rsk"),
    ("hostkey", "=SHA256:x"), ("scripts", b64("s")), ("policy", b64("default-1")), ("project", b64("p")),
    ("name", b64("job")), ("kind", b64("argv")), ("workdir", b64("/home/u")), ("path", "=/usr/bin:/bin"),
    ("partition", b64("gpu")), ("account", "="), ("qos", "="),
    ("nodes", b64("2")), ("cpus", b64("4")), ("mem_mb", b64("1024")), ("gpus", b64("2")),
    ("time_min", b64("90")), ("env", b64("A=1")), ("arg", b64("python")), ("arg", "="), ("arg", "=--lr"),
]  # fmt: skip


def test_plan_from_reads_fields_and_checks_the_hash() -> None:
    plan = answers.plan(parse_framed(plan_output(FIELDS, extra="@@policy verdict=allow\n@@active count=3 cap=10\n")))
    assert plan.partition == "gpu"
    assert plan.argv == ["python", "", "--lr"]
    assert plan.env == ["A=1"]
    assert plan.gpu_hours == pytest.approx(2 * 2 * 90 / 60)
    assert plan.cpu_hours == pytest.approx(4 * 2 * 90 / 60)
    assert plan.active == 3 and plan.active_cap == 10
    assert plan.tasks[0].argv == plan.argv and plan.jobs == 1 and plan.root == "/home/u/.rsk"


def test_plan_with_a_wrong_hash_is_refused() -> None:
    with pytest.raises(ProtocolError):
        answers.plan(parse_framed(plan_output(FIELDS, printed="0" * 64)))


def test_output_without_done_is_no_answer() -> None:
    assert parse(framed("@@hello protocol=2\n@@plan abc\n"), N) is None


def test_noise_and_unframed_lines_are_ignored() -> None:
    text = framed("motd: @@not-at-start\n@@x a=1 b\n  @@indented\n@@done rc=0\n")
    # a login shell that prints rsk-looking lines without this call's nonce changes nothing
    text = "@@active count=0 cap=100\n@@ffffffffffffffffffffffffffffffff done rc=0\n" + text
    out = parse(text, N)
    assert out is not None and [r.kind for r in out.records] == ["x"]
    assert out.records[0].kv == {"a": "1"} and out.rc == 0


def test_a_repeated_key_or_record_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_framed("@@active count=0 count=9\n@@done rc=0\n")
    with pytest.raises(ProtocolError):
        parse_framed("@@active count=0\n@@active count=9\n@@done rc=0\n")
    with pytest.raises(ProtocolError):
        parse_framed("@@done rc=0\n@@done rc=0\n")


@pytest.mark.parametrize(
    ("rc", "cls"), [(2, UsageError), (3, DeniedError), (5, ConflictError), (7, CapReached), (99, ProtocolError)]
)
def test_remote_errors_map_to_typed_errors(rc: int, cls: type[Exception]) -> None:
    out = parse_framed(f"@@error code=x rc={rc} msg={b64('boom')}\n@@done rc={rc}\n")
    with pytest.raises(cls) as info:
        raise_for_error(out)
    assert "boom" in str(info.value)


@pytest.mark.parametrize("code", ["bad-lease", "not-ours"])
def test_a_refusal_the_agent_can_fix_carries_a_hint(code: str) -> None:
    out = parse_framed(f"@@error code={code} rc=2 msg={b64('no')}\n@@done rc=2\n")
    with pytest.raises(UsageError) as info:
        raise_for_error(out)
    assert info.value.code == code and info.value.hint


def test_request_encoding_is_base64_lines_with_empty_items_marked() -> None:
    req = Request(project="p", request_id="r", argv=["a b", ""], env=["Z=1", "A=$(x)"], gpus=0)
    head, body = req.encode().decode().split("\n", 1)
    assert head == f"rsk-request 2 {len(body)}" and body.endswith("\n")  # its lines, counted to the byte
    lines = [head, *body.splitlines()]
    assert "gpus =0" in lines and "project =p" in lines
    args = [unb64(line.split(" ")[1]) for line in lines if line.startswith("arg ")]
    assert args == ["a b", ""]
    envs = [unb64(line.split(" ")[1]) for line in lines if line.startswith("env ")]
    assert envs == ["A=$(x)", "Z=1"]  # sorted by name, so the plan does not depend on option order
    assert all(" " not in line.split(" ", 1)[1] for line in lines[1:])


def test_wire_values_are_literal_only_when_safe() -> None:
    from rsk.wire.protocol import enc

    assert enc("gpu") == "=gpu" and enc("") == "=" and enc("/home/u/x-1.2") == "=/home/u/x-1.2"
    for hostile in ("a b", "$(x)", "`id`", "a;b", "*", "it's", "new\nline", "é", "=x"):
        wire = enc(hostile)
        assert not wire.startswith("=") and unb64(wire) == hostile


def test_job_ids_sort_in_slurms_order_numbers_as_numbers() -> None:
    from rsk.wire.protocol import job_order

    ids = ["7_10", "7_2", "10", "9", "7s3", "7_1", "7"]
    assert sorted(ids, key=job_order) == ["7", "7_1", "7_2", "7_10", "7s3", "9", "10"]
