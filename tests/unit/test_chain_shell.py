"""A chain's command run by a shell without exec never yields: SIGUSR1 kills the shell, not the program."""

from __future__ import annotations

from rsk.request.chain import shell_swallows_signal, shell_warning


def test_a_shell_without_exec_is_caught_and_one_with_exec_or_no_shell_is_not() -> None:
    assert shell_swallows_signal(["sh", "-c", "TOTAL=200 python3 long.py"])
    assert shell_swallows_signal(["/bin/bash", "-lc", "module load x && python train.py"])
    assert not shell_swallows_signal(["sh", "-c", "cd x && exec python train.py"])
    assert not shell_swallows_signal(["python3", "long.py"])
    assert not shell_swallows_signal(["sh", "run.sh"])  # a script: its own business
    said = shell_warning(["sh", "-c", "python3 long.py"])
    assert said is not None and "exec" in said and "sh -c" in said
