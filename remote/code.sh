# shellcheck shell=sh
# rsk code need|put PROJECT DIGEST (stdin: "manifest LENGTH", the manifest, for put then a tar of blobs): a project's
# code snapshots, content-addressed under $RSK_ROOT/code/PROJECT/, built once from verified blobs (docs/protocol.md,
# "Code up").

read_manifest() { # MANIFEST: its LENGTH bytes read to the byte (rsk_take: the tar after it stays whole), checked in one pass
    IFS=' ' read -r rsk_w rsk_n || true
    { [ "$rsk_w" = manifest ] && rsk_is_uint "${rsk_n:-}"; } || rsk_fail "$RSK_E_USAGE" bad-manifest "no manifest LENGTH line"
    rsk_take "$rsk_n"; MANIFEST=$RSK_TAKEN
    rsk_e=$(printf '%s' "$MANIFEST" | awk '/[^ A-Za-z0-9._\/+@:,-]/ { print "a manifest line has unsafe characters"; exit }
        NF != 3 || length($1) != 64 { print "a manifest line is not SHA MODE PATH"; exit }
        $2 != "644" && $2 != "755" { print "mode must be 644 or 755"; exit }
        ("/" $3 "/") ~ /\/\.\.?\// || $3 ~ /^\// { print "path " $3 " leaves the snapshot"; exit }
        $3 ~ /^-|\/-/ { print "path " $3 " starts with a dash"; exit }')
    [ -z "$rsk_e" ] || rsk_fail "$RSK_E_USAGE" bad-manifest "$rsk_e"
}
build() { # the snapshot from blobs, once; its manifest must hash to DIGEST
    SNAP=$AREA/snap/$DIGEST
    if [ ! -f "$SNAP/.rsk-manifest" ]; then
        rsk_tmp=$AREA/snap/.build.$$
        rm -rf "$rsk_tmp"
        mkdir -p "$rsk_tmp" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create $rsk_tmp"
        printf '%s' "$MANIFEST" | while read -r sha mode path; do
            mkdir -p "$rsk_tmp/$(dirname "$path")" && cp "$AREA/blobs/$sha" "$rsk_tmp/$path" && chmod "$mode" "$rsk_tmp/$path" \
                || exit 1
        done || { rm -rf "$rsk_tmp"; rsk_fail "$RSK_E_ROOT" root-unwritable "cannot build the snapshot (a full disk?)"; }
        printf '%s' "$MANIFEST" >"$rsk_tmp/.rsk-manifest"
        rsk_hash_file "$rsk_tmp/.rsk-manifest"
        [ "$RSK_H" = "$DIGEST" ] || { rm -rf "$rsk_tmp"; rsk_fail "$RSK_E_USAGE" bad-manifest "the manifest does not hash to $DIGEST"; }
        mv "$rsk_tmp" "$SNAP" 2>/dev/null || rm -rf "$rsk_tmp" # another call built it first: fine
    fi
    rsk_emit ready "dir=$SNAP"
}
missing() { # the blobs of the manifest not stored yet
    printf '%s' "$MANIFEST" | while read -r sha mode path; do [ -f "$AREA/blobs/$sha" ] || echo "$sha"; done | sort -u
}

main() {
    rsk_start
    [ $# -eq 3 ] || rsk_fail "$RSK_E_USAGE" usage "usage: code need|put PROJECT DIGEST"
    rsk_need_token project "$2"
    case $3 in *[!0-9a-f]*) rsk_fail "$RSK_E_USAGE" bad-digest "the digest is hex" ;; esac
    [ "${#3}" -eq 64 ] || rsk_fail "$RSK_E_USAGE" bad-digest "the digest is a sha256"
    DIGEST=$3 AREA=$RSK_ROOT/code/$2
    rsk_need_writable "$AREA/blobs" "$AREA/snap"
    read_manifest
    rsk_lock "$2"
    case $1 in
        need)
            rsk_m=$(missing)
            for sha in $rsk_m; do rsk_emit need "sha=$sha"; done
            [ -n "$rsk_m" ] || build ;;
        put)
            rsk_in=$AREA/.in.$$
            if ! { mkdir -p "$rsk_in" && (cd "$rsk_in" && tar -xf -); }; then
                rm -rf "$rsk_in"
                rsk_fail "$RSK_E_ROOT" root-unwritable "cannot unpack the blobs"
            fi
            # every blob is named by its content's sha256: anything else is dropped, never stored
            for f in "$rsk_in"/*; do
                [ -f "$f" ] || continue
                rsk_hash_file "$f"
                [ "$RSK_H" != "${f##*/}" ] || mv "$f" "$AREA/blobs/${f##*/}"
            done
            rm -rf "$rsk_in"
            [ -z "$(missing)" ] || rsk_fail "$RSK_E_USAGE" blobs-missing "some blobs did not arrive whole; send them again"
            build ;;
        *) rsk_fail "$RSK_E_USAGE" usage "usage: code need|put PROJECT DIGEST" ;;
    esac
}
