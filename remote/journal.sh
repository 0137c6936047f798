#!/bin/sh
# rsk journal: print a project's attempt journal as "@@journal n=LINE EVENT..." lines.
#   journal.sh PROJECT [AFTER]     only lines after line number AFTER (a cursor)
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

main() {
    rsk_start
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: journal.sh PROJECT [AFTER]"; fi
    rsk_need_token project "$1"
    after=${2:-0}
    rsk_is_uint "$after" || rsk_fail "$RSK_E_USAGE" usage "AFTER must be a line number"
    jf=$(rsk_journal_file "$1")
    total=0
    if [ -f "$jf" ]; then
        total=$(wc -l <"$jf" | tr -d ' ')
        awk -v after="$after" -v total="$total" 'NR > after && NR <= total { print "@@journal n=" NR " " $0 }' "$jf"
    fi
    rsk_emit cursor "lines=$total"
}

main "$@"
