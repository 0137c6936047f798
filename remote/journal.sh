# shellcheck shell=sh
# rsk journal PROJECT [AFTER [ANCHOR_LINE ANCHOR_SEAL]]: the journal from the block that holds line AFTER+1, with
# the seal its chain starts from (@@base) and whether the anchor line still carries its seal (@@anchor), so a
# journal cut short or rewritten is reported, never silently accepted.

main() {
    rsk_start
    case $# in 1 | 2 | 4) ;; *) rsk_fail "$RSK_E_USAGE" usage "usage: journal PROJECT [AFTER [ANCHOR_LINE ANCHOR_SEAL]]" ;; esac
    rsk_need_token project "$1"
    rsk_need_line AFTER "${2:-0}"
    after=$RSK_V jf=$RSK_ROOT/journal/$1.log anchor_n=${3:-0} anchor_h=${4:-}
    [ -f "$jf" ] || jf=/dev/null
    rsk_need_line ANCHOR_LINE "$anchor_n"
    case $anchor_h in *[!0-9a-f]*) rsk_fail "$RSK_E_USAGE" usage "ANCHOR_SEAL is hex" ;; esac
    RSK_NONCE=$RSK_NONCE awk -v after="$after" -v an="$anchor_n" -v ah="$anchor_h" "$RSK_AWK"'BEGIN { nonce = ENVIRON["RSK_NONCE"] }
        { line[NR] = $0; if (NR <= after && seal($0) != "") { base = NR; bseal = seal($0) } }
        END {
            print "@@" nonce " base n=" base + 0 " seal=" bseal
            if (an > 0) print "@@" nonce " anchor n=" an " ok=" ((an <= NR && seal(line[an]) == ah) ? 1 : 0)
            for (i = base + 1; i <= NR; i++) print "@@" nonce " journal n=" i " " line[i]
            print "@@" nonce " cursor lines=" NR
        }' "$jf"
}
