"""The human's page (`rsk ui`): approval cards, budgets, the board and GPUs in a browser on 127.0.0.1, with the
same acts as the CLI's `rsk approve` and `rsk deny` behind a single-use launch token, a session cookie, a CSRF
token and exact Host and Origin checks (docs/ui.md, ADR 0032)."""
