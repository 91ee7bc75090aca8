#!/usr/bin/env bash
# Run cmocka test binaries, print each one's output, then one summary line
# "N passed, N failed" counted from cmocka's own result lines.
set -u
passed=0; failed=0; broken=()
for t in "$@"; do
    case "$t" in
    *.py|*.sh) # a Python or shell test script: one test, passed when it exits 0
        case "$t" in *.py) run=python3 ;; *) run=bash ;; esac
        out=$("$run" "$t" 2>&1); rc=$?
        printf '%s\n' "$out"
        if [ $rc -eq 0 ]; then passed=$((passed + 1)); echo "[  PASSED  ] $t"
        else failed=$((failed + 1)); echo "[  FAILED  ] $t (exit $rc)"; fi
        continue ;;
    esac
    [ -x "$t" ] || continue
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)); failed=$((failed + f))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); broken+=("$t (exit $rc)"); fi
done
for b in "${broken[@]:-}"; do [ -n "$b" ] && echo "crashed: $b"; done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
