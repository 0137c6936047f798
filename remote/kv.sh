# shellcheck shell=sh
# The core every program (ahead of lib.sh) and a lease's controller (RSK_CONTROLLER) share: the one reader of
# key=value words in sh (its awk twin is kv() in lib.awk), and the one writer of journal seals.
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
