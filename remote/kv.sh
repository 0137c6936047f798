# shellcheck shell=sh
# The core every program (ahead of lib.sh) and a lease's controller (RSK_CONTROLLER) share: the one reader of
# key=value words in sh (its awk twin is kv() in lib.awk), and the one writer of the journal and its seals.
rsk_get() { # rsk_get LINE KEY: sets RSK_F to the value of key=value in a line ("" when absent); no fork
    case " $1 " in *" $2="*) RSK_F=" $1 " RSK_F=${RSK_F#*" $2="} RSK_F=${RSK_F%% *} ;; *) RSK_F='' ;; esac
}
rsk_sha256() { # the digest of stdin, then other words (sha256sum, else shasum, else openssl; no cut)
    if command -v sha256sum >/dev/null 2>&1; then sha256sum
    elif command -v shasum >/dev/null 2>&1; then shasum -a 256
    else openssl dgst -sha256 -r; fi
}
# rsk_seal PREVSEAL BLOCK: RSK_SEAL, sha256(PREVSEAL "\n" BLOCK)[0:16] (docs/protocol.md, "The attempt journal")
rsk_seal() { RSK_SEAL=$(printf '%s\n%s' "$1" "$2" | rsk_sha256) RSK_SEAL=${RSK_SEAL%"${RSK_SEAL#????????????????}"}; }
rsk_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
# rsk_append JOURNAL BLOCK: BLOCK (whole lines) appended as one sealed block (docs/protocol.md, "The attempt
# journal"; the project lock is held), RSK_SEAL its seal. A torn or unsealed tail (a cut write, an older rsk) is
# kept and sealed with the block, after an ev=repaired line that counts its lines. Fails when the disk refuses.
rsk_append() {
    rsk_prev='' rsk_tail='' rsk_b=$2
    if [ -s "$1" ]; then
        rsk_last=$(tail -n 1 "$1" && printf x) # "x" keeps the newline a whole last line ends with
        case $rsk_last in
            *" h="*"
x") rsk_last=${rsk_last%?x} ;; # sealed and whole
            *)
                case $rsk_last in *"
x") ;; *) printf '\n' >>"$1" || return 1 ;; esac
                # one pass: the last seal, how many lines follow it, and those lines
                rsk_tail=$(awk "$RSK_AWK"'seal($0) != "" { h = seal($0); t = ""; n = 0; next }
                    { t = t $0 "\n"; n++ } END { printf "h=%s %d\n%sx", h, n, t }' "$1")
                rsk_last=${rsk_tail%%"
"*} rsk_tail=${rsk_tail#*"
"}
                rsk_tail=${rsk_tail%x}
                rsk_b="v=2 t=$(rsk_now) ev=repaired rid=- plan=- idx=- lines=${rsk_last#* }
$rsk_b" ;;
        esac
        rsk_get "$rsk_last" h
        rsk_prev=$RSK_F
    fi
    rsk_seal "$rsk_prev" "$rsk_tail$rsk_b"
    printf '%s h=%s\n' "${rsk_b%?}" "$RSK_SEAL" >>"$1" 2>/dev/null
}
