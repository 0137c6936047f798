#!/usr/bin/env bats
# install.sh in a temporary HOME: fresh install, idempotent rerun, uninstall, foreign folders,
# --harden merging and removal, --dry-run.
bats_require_minimum_version 1.5.0

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup() {
    HOME=$(mktemp -d /tmp/rsk-home.XXXXXX)
    export HOME
    unset XDG_STATE_HOME XDG_DATA_HOME XDG_CONFIG_HOME CLAUDE_CONFIG_DIR CODEX_HOME
}

teardown() { rm -rf "$HOME"; }

snapshot() { (cd "$HOME" && find . -print0 | LC_ALL=C sort -z | xargs -0 ls -ld --time-style=+%s 2>/dev/null | awk '{print $1, $5, $6, $7}'); }

@test "fresh install puts the skill where each agent reads it, and nowhere legacy" {
    run --separate-stderr sh "$REPO/install.sh" --no-cli
    [ "$status" -eq 0 ]
    [ -f "$HOME/.claude/skills/rsk/SKILL.md" ]
    [ -f "$HOME/.agents/skills/rsk/SKILL.md" ]
    [ ! -e "$HOME/.codex/skills" ]
    [ ! -e "$HOME/.pi/agent/skills" ]
    cmp "$REPO/skills/rsk/SKILL.md" "$HOME/.claude/skills/rsk/SKILL.md"
    grep -qx "skill $HOME/.claude/skills/rsk" "$HOME/.local/state/rsk/install-receipt"
}

@test "--agents claude installs only Claude Code's copy" {
    run sh "$REPO/install.sh" --no-cli --agents claude
    [ "$status" -eq 0 ]
    [ -d "$HOME/.claude/skills/rsk" ]
    [ ! -e "$HOME/.agents" ]
}

@test "a second run changes nothing and says so" {
    sh "$REPO/install.sh" --no-cli >/dev/null
    before=$(snapshot)
    run sh "$REPO/install.sh" --no-cli
    [ "$status" -eq 0 ]
    [[ "$output" == *"nothing changed"* ]]
    [ "$(snapshot)" = "$before" ]
}

@test "uninstall leaves nothing behind" {
    mkdir -p "$HOME/.claude/skills/other"
    before=$(snapshot)
    sh "$REPO/install.sh" --no-cli --harden >/dev/null
    run sh "$REPO/install.sh" --uninstall
    [ "$status" -eq 0 ]
    [ ! -e "$HOME/.claude/skills/rsk" ]
    [ ! -e "$HOME/.agents/skills/rsk" ]
    [ ! -e "$HOME/.local/state/rsk/install-receipt" ]
    [ ! -e "$HOME/.codex/rules/rsk.rules" ]
    [ -d "$HOME/.claude/skills/other" ]
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["permissions"]["deny"])' "$HOME/.claude/settings.json")" = "[]" ]
}

@test "a skill folder it did not install is refused unless --force" {
    mkdir -p "$HOME/.claude/skills/rsk"
    echo mine >"$HOME/.claude/skills/rsk/SKILL.md"
    run sh "$REPO/install.sh" --no-cli
    [ "$status" -ne 0 ]
    [[ "$output" == *"was not installed by this installer"* ]]
    [ "$(cat "$HOME/.claude/skills/rsk/SKILL.md")" = mine ]
    run sh "$REPO/install.sh" --no-cli --force
    [ "$status" -eq 0 ]
    cmp "$REPO/skills/rsk/SKILL.md" "$HOME/.claude/skills/rsk/SKILL.md"
}

@test "--harden merges its rules into Claude Code's settings, keeps the user's, and uninstall removes only its own" {
    mkdir -p "$HOME/.claude"
    cat >"$HOME/.claude/settings.json" <<'JSON'
{"model": "opus", "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Bash(rm -rf:*)", "Bash(sbatch:*)"]}, "env": {"A": "1"}}
JSON
    run sh "$REPO/install.sh" --no-cli --harden
    [ "$status" -eq 0 ]
    deny() { python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["permissions"]["deny"]))' "$HOME/.claude/settings.json"; }
    deny | grep -qxF 'Bash(rsk approve:*)'
    deny | grep -qxF 'Bash(rsk grant:*)'
    deny | grep -qxF 'Bash(rsk ui:*)'
    # the forms an agent would use: python3 -m rsk, a path, env, sh -c; srun and salloc beside sbatch
    deny | grep -qxF 'Bash(*rsk approve *)'
    deny | grep -qxF 'Bash(* srun *)'
    deny | grep -qxF "Bash(*'salloc *)"
    deny | grep -qxF "Edit(/$HOME/.local/state/rsk/**)"
    deny | grep -qxF 'Bash(rm -rf:*)'
    [ "$(deny | grep -cxF 'Bash(sbatch:*)')" -eq 1 ]
    # the sandbox (when the user turns it on) keeps the ledger and the keys out of the agent's reach
    sandbox() { python3 -c 'import json,sys; f=json.load(open(sys.argv[1])).get("sandbox",{}).get("filesystem",{}); print("\n".join(f.get(sys.argv[2],[])))' "$HOME/.claude/settings.json" "$1"; }
    sandbox denyRead | grep -qxF "/$HOME/.local/state/rsk"
    sandbox denyRead | grep -qxF '~/.ssh'
    sandbox denyWrite | grep -qxF "/$HOME/.config/rsk"
    grep -q 'decision = "forbidden"' "$HOME/.codex/rules/rsk.rules"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["model"]=="opus" and d["env"]=={"A":"1"} and d["permissions"]["allow"]==["Bash(ls:*)"]' "$HOME/.claude/settings.json"
    run sh "$REPO/install.sh" --no-cli --harden
    [[ "$output" == *"nothing changed"* ]]
    sh "$REPO/install.sh" --uninstall >/dev/null
    [ "$(deny)" = "$(printf 'Bash(rm -rf:*)\nBash(sbatch:*)')" ]
    [ -z "$(sandbox denyRead)" ] && [ -z "$(sandbox denyWrite)" ]
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["model"]=="opus"' "$HOME/.claude/settings.json"
}

@test "--harden refuses a settings file that is not JSON and leaves it alone" {
    mkdir -p "$HOME/.claude"
    printf '{broken' >"$HOME/.claude/settings.json"
    run sh "$REPO/install.sh" --no-cli --harden --agents claude
    [ "$status" -ne 0 ]
    [[ "$output" == *"not valid JSON"* ]]
    [ "$(cat "$HOME/.claude/settings.json")" = '{broken' ]
}

@test "a run that only hardens says it changed something" {
    sh "$REPO/install.sh" --no-cli >/dev/null
    run sh "$REPO/install.sh" --no-cli --harden
    [[ "$output" == *"done; receipt"* ]]
}

@test "--dry-run prints every action and changes nothing" {
    before=$(snapshot)
    run sh "$REPO/install.sh" --dry-run --harden
    [ "$status" -eq 0 ]
    [[ "$output" == *"would install the skill in $HOME/.claude/skills/rsk"* ]]
    [[ "$output" == *"would install rsk into"* ]]
    [[ "$output" == *"dry run: nothing was changed"* ]]
    [ "$(snapshot)" = "$before" ]
}

@test "bad options get a clear error" {
    run sh "$REPO/install.sh" --agents vim
    [ "$status" -ne 0 ]
    [[ "$output" == *"unknown agent 'vim'"* ]]
    run sh "$REPO/install.sh" --bogus
    [ "$status" -ne 0 ]
    run sh "$REPO/install.sh" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"--uninstall"* ]]
}

@test "the command installs, and rsk --version works in a new login shell; uninstall removes it" {
    cp /etc/skel/.profile "$HOME/.profile"
    run sh "$REPO/install.sh" --agents claude
    [ "$status" -eq 0 ]
    run env -i HOME="$HOME" PATH=/usr/bin:/bin sh -lc 'rsk --version'
    [ "$status" -eq 0 ]
    [[ "$output" == "rsk "* ]]
    run env -i HOME="$HOME" PATH=/usr/bin:/bin sh -lc 'rsk --help'
    [[ "$output" == *"launch"* ]]
    sh "$REPO/install.sh" --uninstall >/dev/null
    [ ! -e "$HOME/.local/bin/rsk" ]
    [ ! -e "$HOME/.local/share/rsk" ]
}

@test "CLAUDE_CONFIG_DIR and CODEX_HOME move where the skill and the rules go" {
    export CLAUDE_CONFIG_DIR="$HOME/cc" CODEX_HOME="$HOME/cx"
    run sh "$REPO/install.sh" --no-cli --harden
    [ "$status" -eq 0 ]
    [ -f "$HOME/cc/skills/rsk/SKILL.md" ]
    [ ! -e "$HOME/.claude/skills/rsk" ]
    grep -qF 'Bash(rsk approve:*)' "$HOME/cc/settings.json"
    [ -f "$HOME/cx/rules/rsk.rules" ]
    run sh "$REPO/install.sh" --uninstall
    [ ! -e "$HOME/cc/skills/rsk" ] && [ ! -e "$HOME/cx/rules/rsk.rules" ]
}

@test "a skill that npx skills add linked in is recognised and left alone, not refused" {
    mkdir -p "$HOME/.agents/skills/rsk" "$HOME/.claude/skills"
    cp -R "$REPO/skills/rsk/." "$HOME/.agents/skills/rsk/"
    ln -s ../../.agents/skills/rsk "$HOME/.claude/skills/rsk"
    run sh "$REPO/install.sh" --no-cli
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q 'left as it is'
    [ -L "$HOME/.claude/skills/rsk" ]
    [ ! -f "$HOME/.agents/skills/rsk/.rsk-install" ]
}

@test "--mcp registers rsk mcp at user scope for Claude Code and Codex, and uninstall removes only that" {
    printf '{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}\n' >"$HOME/.claude.json"
    mkdir -p "$HOME/.codex"
    printf 'model = "o9"\n\n[mcp_servers.other]\ncommand = "x"\n' >"$HOME/.codex/config.toml"
    cp "$HOME/.codex/config.toml" "$BATS_TEST_TMPDIR/codex-before"
    run sh "$REPO/install.sh" --no-cli --mcp
    [ "$status" -eq 0 ]
    rsk_path=$(command -v rsk)
    python3 - "$HOME/.claude.json" "$rsk_path" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
assert data["numStartups"] == 3 and data["mcpServers"]["other"] == {"command": "x"}, data
assert data["mcpServers"]["rsk"] == {"type": "stdio", "command": sys.argv[2], "args": ["mcp"], "env": {}}, data
PY
    python3 - "$HOME/.codex/config.toml" "$rsk_path" <<'PY'
import sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))
assert data["model"] == "o9" and data["mcp_servers"]["other"] == {"command": "x"}, data
assert data["mcp_servers"]["rsk"] == {"command": sys.argv[2], "args": ["mcp"]}, data
PY
    grep -qx "claude-mcp $HOME/.claude.json" "$HOME/.local/state/rsk/install-receipt"
    # idempotent
    run sh "$REPO/install.sh" --no-cli --mcp
    [[ "$output" == *"nothing changed"* ]]
    [ "$(grep -c 'mcp_servers.rsk' "$HOME/.codex/config.toml")" -eq 1 ]
    run sh "$REPO/install.sh" --uninstall
    [ "$status" -eq 0 ]
    cmp "$HOME/.codex/config.toml" "$BATS_TEST_TMPDIR/codex-before"
    [ "$(python3 -c 'import json,sys; print(sorted(json.load(open(sys.argv[1]))["mcpServers"]))' "$HOME/.claude.json")" = "['other']" ]
}

@test "--mcp leaves an rsk server the user registered alone, and honours CLAUDE_CONFIG_DIR and CODEX_HOME" {
    export CLAUDE_CONFIG_DIR="$HOME/cc" CODEX_HOME="$HOME/cx"
    mkdir -p "$CODEX_HOME"
    printf '[mcp_servers.rsk]\ncommand = "mine"\n' >"$CODEX_HOME/config.toml"
    run sh "$REPO/install.sh" --no-cli --mcp
    [ "$status" -eq 0 ]
    [[ "$output" == *"left as the user's"* ]]
    [ "$(cat "$CODEX_HOME/config.toml")" = "$(printf '[mcp_servers.rsk]\ncommand = "mine"')" ]
    [ -f "$CLAUDE_CONFIG_DIR/.claude.json" ]
    [ ! -e "$HOME/.claude.json" ]
    sh "$REPO/install.sh" --uninstall >/dev/null
    [ "$(cat "$CODEX_HOME/config.toml")" = "$(printf '[mcp_servers.rsk]\ncommand = "mine"')" ]
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])))' "$CLAUDE_CONFIG_DIR/.claude.json")" = "{}" ]
}

@test "--mcp uses the agents' own commands when they are installed (they may be rewriting their files)" {
    mkdir -p "$BATS_TEST_TMPDIR/bin"
    for agent in claude codex; do
        printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$agent" "$BATS_TEST_TMPDIR/calls" >"$BATS_TEST_TMPDIR/bin/$agent"
        chmod +x "$BATS_TEST_TMPDIR/bin/$agent"
    done
    PATH="$BATS_TEST_TMPDIR/bin:$PATH" run sh "$REPO/install.sh" --no-cli --mcp
    [ "$status" -eq 0 ]
    rsk_path=$(command -v rsk)
    grep -qxF "claude mcp add --scope user rsk -- $rsk_path mcp" "$BATS_TEST_TMPDIR/calls"
    grep -qxF "codex mcp add rsk -- $rsk_path mcp" "$BATS_TEST_TMPDIR/calls"
    [ ! -e "$HOME/.claude.json" ] && [ ! -e "$HOME/.codex/config.toml" ]
    PATH="$BATS_TEST_TMPDIR/bin:$PATH" run sh "$REPO/install.sh" --uninstall
    grep -qxF "claude mcp remove --scope user rsk" "$BATS_TEST_TMPDIR/calls"
    grep -qxF "codex mcp remove rsk" "$BATS_TEST_TMPDIR/calls"
}
