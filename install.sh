#!/bin/sh
# rsk installer: the rsk command and the agent skill, with a receipt so --uninstall removes
# exactly what was installed. POSIX sh; prints its plan before acting; idempotent.
set -eu

usage() {
    cat <<'USAGE'
usage: ./install.sh [options]

Installs the rsk command (uv tool, else pipx, else a virtual environment with a shim in
~/.local/bin) and the rsk skill where agents read it:
  claude  ~/.claude/skills/rsk   (Claude Code; $CLAUDE_CONFIG_DIR/skills/rsk when that is set)
  codex   ~/.agents/skills/rsk   (OpenAI Codex; its rules go to $CODEX_HOME, default ~/.codex)
  pi      ~/.agents/skills/rsk   (pi)
A skill folder another tool made (a link from `npx skills add`, or an rsk skill without this
installer's receipt) is left as it is.

options:
  --from SRC          install the command from SRC (a checkout or a pip spec; default: this checkout)
  --agents LIST       comma-separated: claude,codex,pi (default: all three)
  --no-cli            install only the skill
  --harden            add rules so agents cannot run rsk approve/grant/deny/deny-rule/ui, sbatch,
                      srun, salloc or scancel on their own, in the forms an agent would use
                      (python3 -m rsk, a path, env, sh -c), nor edit rsk's state (Claude Code:
                      permissions.deny in ~/.claude/settings.json; Codex: ~/.codex/rules/rsk.rules).
                      A guard against accidents, not a boundary: see docs/security.md
  --mcp               register rsk's MCP server (`rsk mcp`) at user scope: Claude Code with
                      `claude mcp add --scope user` (else in ~/.claude.json, or
                      $CLAUDE_CONFIG_DIR/.claude.json), Codex with `codex mcp add` (else in
                      $CODEX_HOME/config.toml); pi uses the skill. An `rsk` server the user
                      registered is left as it is
  --force             replace a skill folder this installer did not create
  --dry-run           print every action, change nothing
  --uninstall         remove exactly what the receipt lists
  -h, --help          this help
USAGE
}

say() { printf 'rsk-install: %s\n' "$*"; }
die() { printf 'rsk-install: error: %s\n' "$*" >&2; exit 1; }
need_cmd() { command -v "$1" >/dev/null 2>&1 || die "this needs '$1' ($2)"; }

HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${XDG_STATE_HOME:-$HOME/.local/state}/rsk
RECEIPT=$STATE/install-receipt
DATA=${XDG_DATA_HOME:-$HOME/.local/share}/rsk
BIN=$HOME/.local/bin
DRY=0
FORCE=0
CLI=1
HARDEN=0
MCP=0
UNINSTALL=0
AGENTS=claude,codex,pi
SRC=$HERE
CHANGED=0

act() { # act DESCRIPTION CMD...: run CMD (or only say it with --dry-run)
    desc=$1
    shift
    if [ "$DRY" = 1 ]; then say "would $desc"; return 0; fi
    say "$desc"
    "$@"
    CHANGED=1
}

receipt_has() { [ -f "$RECEIPT" ] && grep -qxF "$1" "$RECEIPT"; }
receipt_add() { # rsk's state directory is its user's own (0700, files 0600), as rsk makes it
    [ "$DRY" = 1 ] && return 0
    (umask 077 && mkdir -p "$STATE" && { receipt_has "$1" || printf '%s\n' "$1" >>"$RECEIPT"; })
}
receipt_drop() { # receipt_drop PREFIX: forget every line that starts with PREFIX
    [ -f "$RECEIPT" ] || return 0
    (umask 077 && { grep -vF -- "$1" "$RECEIPT" >"$RECEIPT.tmp" || true; } && mv "$RECEIPT.tmp" "$RECEIPT")
}

digest_dir() { (cd "$1" && find . -type f ! -name '.rsk-install' | LC_ALL=C sort | xargs cat | cksum | cut -d' ' -f1); }

# --- the command ---------------------------------------------------------------
src_digest() {
    if [ -f "$SRC/pyproject.toml" ]; then
        (cd "$SRC" && find pyproject.toml src remote skills -type f ! -path '*__pycache__*' 2>/dev/null \
            | LC_ALL=C sort | xargs cat | cksum | cut -d' ' -f1)
    else
        printf '%s' "$SRC" | cksum | cut -d' ' -f1
    fi
}

install_cli() {
    want="cli-src $(src_digest)"
    if receipt_has "$want"; then say "rsk command: unchanged"; return 0; fi
    if command -v uv >/dev/null 2>&1; then
        act "install the rsk command with uv tool from $SRC" uv tool install --force --quiet "$SRC"
        receipt_add "uv-tool rsk"
    elif command -v pipx >/dev/null 2>&1; then
        act "install the rsk command with pipx from $SRC" pipx install --force "$SRC"
        receipt_add "pipx rsk"
    else
        need_cmd python3 "Python 3.11 or newer"
        if [ ! -x "$DATA/venv/bin/python" ]; then
            act "create a virtual environment in $DATA/venv" python3 -P -m venv "$DATA/venv"
        fi
        act "install rsk into $DATA/venv from $SRC" "$DATA/venv/bin/python" -P -m pip install --quiet --upgrade "$SRC"
        receipt_add "venv $DATA/venv"
        if [ "$DRY" = 1 ] || [ ! -f "$BIN/rsk" ] || ! grep -qF "$(shim_text)" "$BIN/rsk" 2>/dev/null; then
            act "write the shim $BIN/rsk" write_shim
        fi
        receipt_add "file $BIN/rsk"
        case ":$PATH:" in
            *":$BIN:"*) ;;
            *) say "note: $BIN is not on PATH; add this line to your shell profile: export PATH=\"\$HOME/.local/bin:\$PATH\"" ;;
        esac
    fi
    receipt_drop "cli-src "
    receipt_add "$want"
}

# The shim starts Python without `site` (-S): a command that a broker runs needs only the standard
# library, and rsk loads `site` itself when the command runs here (src/rsk/launcher.py).
shim_text() {
    launcher=$("$DATA/venv/bin/python" -P -c 'import rsk.launcher as m; print(m.__file__)')
    printf 'exec "%s" -S "%s" "$@"' "$DATA/venv/bin/python" "$launcher"
}

write_shim() {
    mkdir -p "$BIN"
    printf '#!/bin/sh\n%s\n' "$(shim_text)" >"$BIN/rsk.tmp"
    chmod 0755 "$BIN/rsk.tmp"
    mv "$BIN/rsk.tmp" "$BIN/rsk"
}

# --- the skill -------------------------------------------------------------------
# Claude Code reads $CLAUDE_CONFIG_DIR (default ~/.claude), Codex $CODEX_HOME (default ~/.codex).
CLAUDE_DIR=${CLAUDE_CONFIG_DIR:-$HOME/.claude}
CODEX_DIR=${CODEX_HOME:-$HOME/.codex}

skill_dirs() {
    dirs=''
    case ",$AGENTS," in *,claude,*) dirs="$CLAUDE_DIR/skills/rsk" ;; esac
    case ",$AGENTS," in *,codex,* | *,pi,*) dirs="$dirs $HOME/.agents/skills/rsk" ;; esac
    printf '%s' "$dirs"
}

install_skill() { # install_skill DIR
    dest=$1
    srcdir=$HERE/skills/rsk
    [ -f "$srcdir/SKILL.md" ] || srcdir=$(python3 -P -c 'import rsk.wire.bundle as b; print(b.data_dir("skills") / "rsk")')
    want=$(digest_dir "$srcdir")
    if [ -L "$dest" ] && [ "$FORCE" != 1 ]; then
        # `npx skills add` installs into ~/.agents/skills and links each agent's folder to it
        say "skill $dest: a link to $(readlink "$dest") (installed by another tool, e.g. npx skills add); left as it is"
        return 0
    fi
    if [ -d "$dest" ] && ! receipt_has "skill $dest" && [ "$FORCE" != 1 ] \
        && grep -qx 'name: rsk' "$dest/SKILL.md" 2>/dev/null; then
        say "skill $dest: the rsk skill, installed by another tool; left as it is (--force replaces it)"
        return 0
    fi
    if [ -d "$dest" ]; then
        if [ -f "$dest/.rsk-install" ] && [ "$(cat "$dest/.rsk-install")" = "$want" ] && receipt_has "skill $dest"; then
            say "skill $dest: unchanged"
            return 0
        fi
        if ! receipt_has "skill $dest" && [ "$FORCE" != 1 ]; then
            die "$dest exists and was not installed by this installer; move it away or pass --force"
        fi
        act "replace the skill in $dest" rm -rf "$dest"
    fi
    act "install the skill in $dest" copy_skill "$srcdir" "$dest" "$want"
    receipt_add "skill $dest"
}

copy_skill() { # copy_skill SRC DEST DIGEST
    mkdir -p "$(dirname "$2")"
    rm -rf "$2.tmp"
    cp -R "$1" "$2.tmp"
    printf '%s\n' "$3" >"$2.tmp/.rsk-install"
    mv "$2.tmp" "$2"
}

# --- hardening ---------------------------------------------------------------------
# Claude Code: a rule may hold * anywhere (Bash(* sbatch *)), and Edit(//ABS/**) denies file edits.
# Each human-only rsk command and each Slurm command is denied at the start of a command line, after a
# space (env, python3 -m, ssh HOST), after a slash (a path to it) and after a quote (sh -c '...').
# A command built at run time (c=sbatch; $c) is beyond any rule: docs/security.md says so.
claude_rules() {
    for c in "rsk approve" "rsk grant" "rsk deny" "rsk deny-rule" "rsk ui"; do
        printf 'Bash(%s:*)\nBash(*%s *)\n' "$c" "$c"
    done
    for c in sbatch srun salloc scancel; do
        printf 'Bash(%s:*)\nBash(* %s *)\nBash(*/%s *)\nBash(*%s%s *)\nBash(*"%s *)\n' "$c" "$c" "$c" "'" "$c" "$c"
    done
    printf 'Edit(/%s/**)\nEdit(/%s/**)\n' "$RSK_STATE_DIR" "$RSK_CONFIG_DIR"
}
RSK_STATE_DIR=${RSK_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/rsk}
RSK_CONFIG_DIR=${XDG_CONFIG_HOME:-$HOME/.config}/rsk

json_edit() { # json_edit FILE OP ARG...: one edit of a JSON file, keeping everything else; atomic
    # OP: deny-add RULE... | deny-remove RULE... (permissions.deny) | list-add KEY.PATH VALUE... |
    # list-remove KEY.PATH VALUE... (any list, e.g. sandbox.filesystem.denyRead) | mcp-add COMMAND | mcp-remove
    need_cmd python3 "to edit $1"
    python3 -P - "$@" <<'PY'
import json, os, sys
path, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
except FileNotFoundError:
    data = {}
except ValueError as exc:
    sys.exit(f"rsk-install: error: {path} is not valid JSON ({exc}); fix it first, it was not changed")
if op.startswith(("deny-", "list-")):
    keys, values = (["permissions", "deny"], args) if op.startswith("deny-") else (args[0].split("."), args[1:])
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    items = node.setdefault(keys[-1], [])
    if op.endswith("-add"):
        items.extend(v for v in values if v not in items)
    else:
        node[keys[-1]] = [v for v in items if v not in values]
else:
    servers = data.setdefault("mcpServers", {})
    if op == "mcp-add":
        servers["rsk"] = {"type": "stdio", "command": args[0], "args": ["mcp"], "env": {}}
    else:
        servers.pop("rsk", None)
        if not servers:
            del data["mcpServers"]
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
tmp = path + ".rsk-tmp"
with open(tmp, "w", encoding="utf-8") as fh:
    json.dump(data, fh, indent=2)
    fh.write("\n")
os.replace(tmp, path)
PY
}

claude_settings() { # claude_settings add|remove RULE...: edit permissions.deny
    op=deny-$1
    shift
    json_edit "$CLAUDE_DIR/settings.json" "$op" "$@"
}

claude_has_rule() { # claude_has_rule VALUE [KEY.PATH]: the list (permissions.deny by default) holds VALUE
    [ -f "$CLAUDE_DIR/settings.json" ] || return 1
    python3 -P - "$CLAUDE_DIR/settings.json" "$1" "${2:-permissions.deny}" <<'PY'
import json, sys
try:
    node = json.load(open(sys.argv[1], encoding="utf-8"))
    for key in sys.argv[3].split("."):
        node = node.get(key, {})
except (ValueError, AttributeError):
    sys.exit(1)
sys.exit(0 if isinstance(node, list) and sys.argv[2] in node else 1)
PY
}
# Claude Code's sandbox (when the user turns it on) enforces these for every command the agent runs:
# rsk's state (the ledger) and the SSH keys unreadable, rsk's state and configuration unwritable.
# Paths: // is absolute, ~/ is the home directory.
claude_sandbox_rules() {
    printf 'sandbox.filesystem.denyRead /%s\nsandbox.filesystem.denyRead ~/.ssh\n' "$RSK_STATE_DIR"
    printf 'sandbox.filesystem.denyWrite /%s\nsandbox.filesystem.denyWrite /%s\n' "$RSK_STATE_DIR" "$RSK_CONFIG_DIR"
}

CODEX_RULES_FILE=$CODEX_DIR/rules/rsk.rules

write_codex_rules() {
    mkdir -p "$(dirname "$CODEX_RULES_FILE")"
    cat >"$CODEX_RULES_FILE.tmp" <<'RULES'
# Written by rsk's install.sh --harden; ./install.sh --uninstall removes it.
# Approving, granting and denying are a human's acts, done in the human's own terminal.
# Codex matches exact token prefixes (simple `bash -lc` scripts are split into their commands), so
# each way of starting rsk gets its own rule.
prefix_rule(
    pattern = ["rsk", ["approve", "grant", "deny", "deny-rule", "ui"]],
    decision = "forbidden",
    justification = "A human approves rsk cards in their own terminal; tell them the card id and run `rsk wait CARD`.",
    match = ["rsk approve c-1234", "rsk grant add --jobs 5"],
    not_match = ["rsk launch -t lab -- true", "rsk approvals"],
)
prefix_rule(
    pattern = [["python", "python3"], "-m", "rsk", ["approve", "grant", "deny", "deny-rule", "ui"]],
    decision = "forbidden",
    justification = "A human approves rsk cards in their own terminal; tell them the card id and run `rsk wait CARD`.",
    match = ["python3 -m rsk approve c-1"],
)
prefix_rule(
    pattern = ["env", "rsk", ["approve", "grant", "deny", "deny-rule", "ui"]],
    decision = "forbidden",
    justification = "A human approves rsk cards in their own terminal.",
)
prefix_rule(
    pattern = [["sbatch", "srun", "salloc", "scancel"]],
    decision = "forbidden",
    justification = "Use `rsk launch` and `rsk cancel`, which check the budget and never submit twice.",
)
prefix_rule(
    pattern = ["env", ["sbatch", "srun", "salloc", "scancel"]],
    decision = "forbidden",
    justification = "Use `rsk launch` and `rsk cancel`.",
)
RULES
    mv "$CODEX_RULES_FILE.tmp" "$CODEX_RULES_FILE"
}

harden() {
    case ",$AGENTS," in
        *,claude,*)
            while IFS= read -r rule; do # a here-document, not a pipe: CHANGED must survive the loop
                if receipt_has "claude-deny $rule"; then continue; fi
                if claude_has_rule "$rule"; then say "Claude Code already denies $rule (left as the user's)"; continue; fi
                act "add \"$rule\" to permissions.deny in $CLAUDE_DIR/settings.json" claude_settings add "$rule"
                receipt_add "claude-deny $rule"
            done <<RULES
$(claude_rules)
RULES
            while IFS=' ' read -r key value; do
                if receipt_has "claude-list $key $value"; then continue; fi
                if claude_has_rule "$value" "$key"; then say "Claude Code already has $value in $key (left as the user's)"; continue; fi
                act "add \"$value\" to $key in $CLAUDE_DIR/settings.json" json_edit "$CLAUDE_DIR/settings.json" list-add "$key" "$value"
                receipt_add "claude-list $key $value"
            done <<RULES
$(claude_sandbox_rules)
RULES
            say "Claude Code applies its sandbox.filesystem rules when its sandbox is on (/sandbox, or sandbox.enabled); docs/broker.md"
            ;;
    esac
    case ",$AGENTS," in
        *,codex,*)
            if receipt_has "file $CODEX_RULES_FILE"; then
                say "Codex rules $CODEX_RULES_FILE: unchanged"
            elif [ -e "$CODEX_RULES_FILE" ] && [ "$FORCE" != 1 ]; then
                die "$CODEX_RULES_FILE exists and was not written by this installer; pass --force to replace it"
            else
                act "write Codex rules $CODEX_RULES_FILE" write_codex_rules
                receipt_add "file $CODEX_RULES_FILE"
            fi
            ;;
    esac
}

# --- MCP registration ----------------------------------------------------------------
# Claude Code keeps user-scope servers in mcpServers of ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json
# when that is set); Codex in [mcp_servers.NAME] of $CODEX_HOME/config.toml. Each agent's own command
# edits its file when it is installed (it may be running and rewriting that file); else the file is
# edited here. The receipt says which, so --uninstall undoes it the same way.
CLAUDE_JSON=${CLAUDE_CONFIG_DIR:-$HOME}/.claude.json
CODEX_TOML=$CODEX_DIR/config.toml
MCP_BEGIN='# rsk: begin (written by rsk install.sh --mcp; ./install.sh --uninstall removes it)'
MCP_END='# rsk: end'

rsk_command() {
    if [ -x "$BIN/rsk" ]; then printf '%s' "$BIN/rsk"; return 0; fi
    command -v rsk 2>/dev/null || die "--mcp needs the rsk command: install it first (drop --no-cli)"
}

claude_mcp() { # claude_mcp add|remove cli|FILE [COMMAND]
    if [ "$2" = cli ]; then
        if [ "$1" = add ]; then claude mcp add --scope user rsk -- "$3" mcp; else claude mcp remove --scope user rsk; fi
        return
    fi
    if [ "$1" = add ]; then json_edit "$2" mcp-add "$3"; else json_edit "$2" mcp-remove; fi
}

claude_has_mcp() {
    [ -f "$CLAUDE_JSON" ] || return 1
    python3 -P -c 'import json,sys; sys.exit(0 if "rsk" in json.load(open(sys.argv[1])).get("mcpServers", {}) else 1)' \
        "$CLAUDE_JSON" 2>/dev/null
}

codex_mcp() { # codex_mcp add|remove cli|FILE [COMMAND]
    if [ "$2" = cli ]; then
        if [ "$1" = add ]; then codex mcp add rsk -- "$3" mcp; else codex mcp remove rsk; fi
        return
    fi
    if [ "$1" = add ]; then
        mkdir -p "$(dirname "$2")"
        sep=''
        [ ! -s "$2" ] || sep='\n'
        printf "$sep"'%s\n[mcp_servers.rsk]\ncommand = "%s"\nargs = ["mcp"]\n%s\n' "$MCP_BEGIN" "$3" "$MCP_END" >>"$2"
    elif [ -f "$2" ]; then
        # drop the block and the blank line written before it
        awk -v b="$MCP_BEGIN" -v e="$MCP_END" '
            skip { if ($0 == e) skip = 0; next }
            $0 == b { skip = 1; blank = 0; next }
            blank { print ""; blank = 0 }
            $0 == "" { blank = 1; next }
            { print }
            END { if (blank) print "" }' "$2" >"$2.rsk-tmp"
        mv "$2.rsk-tmp" "$2"
    fi
}

register_mcp() {
    cmd=$(rsk_command)
    case $cmd in *'"'* | *\\*) die "the rsk command's path ($cmd) holds a quote or backslash: cannot register it" ;; esac
    case ",$AGENTS," in
        *,claude,*)
            if receipt_has "claude-mcp cli" || receipt_has "claude-mcp $CLAUDE_JSON"; then
                say "Claude Code MCP server rsk: unchanged"
            elif command -v claude >/dev/null 2>&1; then
                act "register the MCP server rsk with Claude Code (claude mcp add --scope user)" claude_mcp add cli "$cmd"
                receipt_add "claude-mcp cli"
            elif claude_has_mcp; then
                say "Claude Code already has an MCP server named rsk in $CLAUDE_JSON (left as the user's)"
            else
                act "add the MCP server rsk to mcpServers in $CLAUDE_JSON" claude_mcp add "$CLAUDE_JSON" "$cmd"
                receipt_add "claude-mcp $CLAUDE_JSON"
            fi
            ;;
    esac
    case ",$AGENTS," in
        *,codex,*)
            if receipt_has "codex-mcp cli" || receipt_has "codex-mcp $CODEX_TOML"; then
                say "Codex MCP server rsk: unchanged"
            elif command -v codex >/dev/null 2>&1; then
                act "register the MCP server rsk with Codex (codex mcp add)" codex_mcp add cli "$cmd"
                receipt_add "codex-mcp cli"
            elif [ -f "$CODEX_TOML" ] && grep -q '^\[mcp_servers\.rsk\]' "$CODEX_TOML"; then
                say "Codex already has [mcp_servers.rsk] in $CODEX_TOML (left as the user's)"
            else
                act "add [mcp_servers.rsk] to $CODEX_TOML" codex_mcp add "$CODEX_TOML" "$cmd"
                receipt_add "codex-mcp $CODEX_TOML"
            fi
            ;;
    esac
}

# --- uninstall ---------------------------------------------------------------------
uninstall() {
    if [ ! -f "$RECEIPT" ]; then say "nothing to uninstall (no receipt at $RECEIPT)"; return 0; fi
    while IFS= read -r line; do
        kind=${line%% *}
        arg=${line#* }
        case $kind in
            skill | venv) [ ! -e "$arg" ] || act "remove $arg" rm -rf "$arg" ;;
            file) [ ! -e "$arg" ] || act "remove $arg" rm -f "$arg" ;;
            uv-tool) act "uninstall $arg (uv tool)" uv tool uninstall "$arg" ;;
            pipx) act "uninstall $arg (pipx)" pipx uninstall "$arg" ;;
            claude-mcp) act "remove the MCP server rsk from Claude Code ($arg)" claude_mcp remove "$arg" ;;
            codex-mcp) act "remove the MCP server rsk from Codex ($arg)" codex_mcp remove "$arg" ;;
            claude-deny) act "remove \"$arg\" from permissions.deny in $CLAUDE_DIR/settings.json" claude_settings remove "$arg" ;;
            claude-list) act "remove \"${arg#* }\" from ${arg%% *} in $CLAUDE_DIR/settings.json" json_edit "$CLAUDE_DIR/settings.json" list-remove "${arg%% *}" "${arg#* }" ;;
            cli-src) ;;
            *) say "receipt line not understood, left alone: $line" ;;
        esac
    done <"$RECEIPT"
    act "remove the receipt $RECEIPT" rm -f "$RECEIPT"
    [ "$DRY" = 1 ] || rmdir "$STATE" 2>/dev/null || true
    [ "$DRY" = 1 ] || rmdir "$DATA" 2>/dev/null || true
}

main() {
    while [ $# -gt 0 ]; do
        case $1 in
            -h | --help) usage; exit 0 ;;
            --dry-run) DRY=1 ;;
            --force) FORCE=1 ;;
            --no-cli) CLI=0 ;;
            --harden) HARDEN=1 ;;
            --mcp) MCP=1 ;;
            --uninstall) UNINSTALL=1 ;;
            --agents) [ $# -ge 2 ] || die "--agents needs a list"; AGENTS=$2; shift ;;
            --agents=*) AGENTS=${1#*=} ;;
            --from) [ $# -ge 2 ] || die "--from needs a source"; SRC=$2; shift ;;
            --from=*) SRC=${1#*=} ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    for a in $(printf '%s' "$AGENTS" | tr ',' ' '); do
        case $a in claude | codex | pi) ;; *) die "unknown agent '$a' (claude, codex, pi)" ;; esac
    done
    [ -n "${HOME:-}" ] || die "HOME is not set"
    if [ "$UNINSTALL" = 1 ]; then
        uninstall
    else
        [ "$CLI" = 0 ] || install_cli
        for d in $(skill_dirs); do install_skill "$d"; done
        [ "$HARDEN" = 0 ] || harden
        [ "$MCP" = 0 ] || register_mcp
        if [ "$DRY" = 1 ]; then say "dry run: nothing was changed"
        elif [ "$CHANGED" = 0 ]; then say "everything was already installed: nothing changed"
        else say "done; receipt: $RECEIPT"; fi
    fi
}

main "$@"
