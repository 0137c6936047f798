#!/bin/sh
# Everything rsk's tests and demo need on a fresh Debian 12 machine, as root; idempotent.
# Installs Debian packages (chromium for the page's browser tests: Playwright drives it, and never downloads
# a browser of its own), rsk (editable, with its dev extra) and the MCP Inspector's CLI (npm),
# then brings the lab cluster up.
set -eu
cd "$(dirname "$0")/.."

need_pkgs=""
for pkg in slurm-wlm munge openssh-server openssh-client shellcheck dash tmux python3 chromium; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_pkgs="$need_pkgs $pkg"
done
command -v npm >/dev/null 2>&1 || need_pkgs="$need_pkgs nodejs npm"
if [ -n "$need_pkgs" ]; then
    printf 'setup: apt-get install%s\n' "$need_pkgs" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086  # the package list splits on purpose
    apt-get install -y -qq $need_pkgs >/dev/null
fi
PY=${RSK_PYTHON:-python3}
# (rsk.entry, not rsk: an install whose checkout is gone leaves rsk an empty namespace that imports)
if ! "$PY" -c 'import rsk.entry, pytest, xdist, hypothesis, paramiko, mcp, playwright' 2>/dev/null || ! command -v bats >/dev/null 2>&1; then
    printf 'setup: pip install -e .[dev]\n' >&2
    "$PY" -m pip install -q -e '.[dev]'
fi
# the MCP Inspector's CLI lists rsk mcp's tools in tests/integration/test_mcp.py
if [ ! -d "$(npm root -g 2>/dev/null)/@modelcontextprotocol/inspector-cli" ]; then
    printf 'setup: npm install -g @modelcontextprotocol/inspector-cli\n' >&2
    npm install -g --silent @modelcontextprotocol/inspector-cli@1.0.3 >/dev/null
fi
# an agent's own OS account: the broker's boundary tests run rsk as it, with Debian's python3 and nothing
# but the standard library (tests/integration/test_broker.py)
id rskagent >/dev/null 2>&1 || useradd --create-home --shell /bin/sh rskagent
sh tests/lab/up.sh >/dev/null
