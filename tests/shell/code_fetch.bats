#!/usr/bin/env bats
# The code and fetch programs under dash: blobs checked on arrival, only missing blobs asked for,
# snapshots bound to their digest, and fetch confined to a job's directory.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

manifest() { # manifest FILE...: "SHA MODE PATH" lines for files in $SRC, sorted by path
    for f in "$@"; do printf '%s 644 %s\n' "$(sha256sum <"$SRC/$f" | cut -c1-64)" "$f"; done | sort -k3
}

code() { # code MODE MANIFEST_FILE [TAR]: run the code program
    { shipped code; printf 'rsk-frame 2 %s\nmanifest %s\n' "$NONCE" "$(wc -c <"$2")"; cat "$2"; [ -z "${3:-}" ] || cat "$3"; } \
        | runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-code "$1" "$PROJECT" "$DIGEST" \
        | sed "s/^@@$NONCE /@@/"
    return "${PIPESTATUS[1]}"
}

@test "only missing blobs are asked for; a blob whose content does not match its name is never stored" {
    SRC=$(mktemp -d)
    echo one >"$SRC/a.txt"
    mkdir "$SRC/sub" && echo two >"$SRC/sub/b.txt"
    manifest a.txt sub/b.txt >"$SRC/m"
    DIGEST=$(sha256sum <"$SRC/m" | cut -c1-64)
    run code need "$SRC/m"
    [ "$(printf '%s\n' "$output" | grep -c '^@@need ')" -eq 2 ]
    # a tar holding one good blob and one whose name lies about its content
    blobs=$(mktemp -d)
    cp "$SRC/a.txt" "$blobs/$(sha256sum <"$SRC/a.txt" | cut -c1-64)"
    echo forged >"$blobs/$(sha256sum <"$SRC/sub/b.txt" | cut -c1-64)"
    (cd "$blobs" && tar -cf "$SRC/t.tar" ./*)
    run code put "$SRC/m" "$SRC/t.tar"
    [ "$status" -eq 2 ]
    [ "$(field error code)" = blobs-missing ]
    run code need "$SRC/m"
    [ "$(printf '%s\n' "$output" | grep -c '^@@need ')" -eq 1 ]
    cp "$SRC/sub/b.txt" "$blobs/$(sha256sum <"$SRC/sub/b.txt" | cut -c1-64)"
    (cd "$blobs" && tar -cf "$SRC/t.tar" ./*)
    run code put "$SRC/m" "$SRC/t.tar"
    [ "$status" -eq 0 ]
    dir=$(field ready dir)
    [ "$(cat "$dir/sub/b.txt")" = two ]
    run code need "$SRC/m"
    [ "$(field ready dir)" = "$dir" ]
    rm -rf "$SRC" "$blobs"
}

@test "a manifest that would leave the snapshot, or lies about its digest, is refused" {
    SRC=$(mktemp -d)
    DIGEST=$(printf 'x' | sha256sum | cut -c1-64)
    printf '%s 644 ../escape\n' "$DIGEST" >"$SRC/m"
    run code need "$SRC/m"
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-manifest ]
    printf '%s 644 a;rm\n' "$DIGEST" >"$SRC/m"
    run code need "$SRC/m"
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-manifest ]
    echo one >"$SRC/a.txt"
    manifest a.txt >"$SRC/m"
    mkdir -p "$ROOT/code/$PROJECT/blobs"
    cp "$SRC/a.txt" "$ROOT/code/$PROJECT/blobs/$(sha256sum <"$SRC/a.txt" | cut -c1-64)"
    chown -R "$LAB_USER" "$ROOT/code"
    run code need "$SRC/m"  # DIGEST is not the manifest's
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-manifest ]
    [ -z "$(ls "$ROOT/code/$PROJECT/snap")" ]
    rm -rf "$SRC"
}

@test "fetch reads a job's files, in blocks from an offset, and nothing outside its directory" {
    submit f1 arg=sh arg=-c 'arg=mkdir -p "$RSK_RUN_DIR/out"; seq 1 30000 > "$RSK_RUN_DIR/out/n.txt"'
    wait_file "$ROOT/runs/$PROJECT/f1/t0/ended"
    run remote fetch "$PROJECT" "$JOB" . 0 0
    printf '%s\n' "$output" | grep -q '^@@entry path=out/n.txt size=168894'
    run remote fetch "$PROJECT" "$JOB" out/n.txt 65536 65536
    [ "$(field file size)" = 168894 ]
    [ "$(printf '%s\n' "$output" | sed -n 's/^@@chunk //p' | tr -d '\n' | base64 -d | wc -c)" -eq 65536 ]
    for bad in ../../journal /etc/passwd 'a b' out/../../x; do
        run remote fetch "$PROJECT" "$JOB" "$bad" 0 0
        [ "$status" -eq 2 ]
    done
    run remote fetch "$PROJECT" "$JOB" out/n.txt 100 65536
    [ "$status" -eq 2 ]
    run remote fetch "$PROJECT" 999999 out/n.txt 0 0
    [ "$(field error code)" = not-ours ]
}

@test "fetch refuses a job directory that was turned into a symlink" {
    submit f2 arg=true
    wait_file "$ROOT/runs/$PROJECT/f2/t0/ended"
    mkdir -p "$ROOT/runs/$PROJECT/f2/t0/work"
    run remote fetch "$PROJECT" "$JOB" . 0 0
    [ "$status" -eq 0 ]
    rm -rf "$ROOT/runs/$PROJECT/f2/t0/work"
    ln -s /etc "$ROOT/runs/$PROJECT/f2/t0/work"
    run remote fetch "$PROJECT" "$JOB" passwd 0 0
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-path ]
    rm "$ROOT/runs/$PROJECT/f2/t0/work"
    mv "$ROOT/runs/$PROJECT/f2/t0" "$ROOT/t0-moved"
    ln -s /etc "$ROOT/runs/$PROJECT/f2/t0"
    run remote fetch "$PROJECT" "$JOB" passwd 0 0
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-path ]
}

@test "a fetch of many jobs answers each after its @@job line; a symlink on one's way is its @@missing, not a read" {
    submit m1 arg=sh arg=-c 'arg=mkdir -p "$RSK_RUN_DIR/out"; echo one > "$RSK_RUN_DIR/out/a.txt"'
    one=$JOB
    submit m2 arg=sh arg=-c 'arg=mkdir -p "$RSK_RUN_DIR/out"; echo two > "$RSK_RUN_DIR/out/a.txt"'
    two=$JOB
    submit m3 arg=sh arg=-c 'arg=mkdir -p "$RSK_RUN_DIR/out"; echo three > "$RSK_RUN_DIR/out/a.txt"'
    three=$JOB
    for r in m1 m2 m3; do wait_file "$ROOT/runs/$PROJECT/$r/t0/ended"; done
    mv "$ROOT/runs/$PROJECT/m3/t0" "$ROOT/m3-moved" # m3's run directory now leads elsewhere
    ln -s "$ROOT/m3-moved" "$ROOT/runs/$PROJECT/m3/t0"
    JOBS="$one,$two,$three,999999,bad/word" run remote fetch "$PROJECT" - out/a.txt 0 65536
    [ "$status" -eq 0 ]
    each() { printf '%s\n' "$output" | awk -v j="@@job job=$1" '$0 == j { on = 1; next } /^@@job / { on = 0 } on'; }
    [ "$(each "$one" | sed -n 's/^@@chunk //p' | base64 -d)" = one ]
    [ "$(each "$two" | sed -n 's/^@@chunk //p' | base64 -d)" = two ]
    each "$three" | grep -q '^@@missing code=bad-path rc=2 '
    ! each "$three" | grep -q '^@@chunk'
    [ "$(printf '%s\n' "$output" | grep -c '^@@job ')" -eq 3 ] # the journal knows no 999999, nor a bad word
    [ -z "$(field error code)" ]
    JOBS="$one" run remote fetch "$PROJECT" - out 0 0 # a directory: each job's files listed
    printf '%s\n' "$output" | grep -q '^@@entry path=a.txt size=4'
    run remote fetch "$PROJECT" - out 0 0 # no jobs line
    [ "$status" -eq 2 ] && [ "$(field error code)" = usage ]
}
