#!/usr/bin/env bash
# Check the systemd integration as `make install` stages it, without booting
# systemd: `systemd-analyze verify` of the installed unit (every directive
# parses, ExecStart is executable, its dependencies resolve), the sysusers.d
# entry creating user and group attnd, the tmpfiles.d entry creating
# /run/attnd, and the default configuration accepted by the installed attnd.
#
#   scripts/verify-systemd.sh ROOT      ROOT: a `make install DESTDIR=ROOT` tree
#   make verify-systemd                 stages one and runs this on it
#
# systemd's own tools come from Debian's systemd package, installed here
# when missing.  Prints what each tool said; exits non-zero when a tool
# failed or printed anything (systemd-analyze exits 0 on "ignoring" lines).
set -euo pipefail
root=$(cd "${1:?usage: verify-systemd.sh STAGED_ROOT}" && pwd)
prefix=${PREFIX:-/usr/local}
sysconfdir=${SYSCONFDIR:-/etc}
unit=$root$prefix/lib/systemd/system/attnd.service

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "verify-systemd: installing systemd from Debian (systemd-analyze)" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
[ -f "$unit" ] || { echo "verify-systemd: no unit at $unit (make install DESTDIR=$root)" >&2; exit 1; }

# systemd's own units (sysinit.target, basic.target ...) so dependencies resolve in ROOT
for d in /usr/lib/systemd/system /lib/systemd/system; do
    if [ -d "$d" ] && [ ! -e "$root$d/sysinit.target" ]; then
        mkdir -p "$root$d" && cp -a "$d/." "$root$d/"
    fi
done
mkdir -p "$root/etc"
status=0
check() { # quiet|any, name, command...: exit 0, and with "quiet" print nothing
    local quiet=$1 name=$2 out rc
    shift 2
    out=$("$@" 2>&1) && rc=0 || rc=$?
    printf '%s: exit %d%s\n' "$name" "$rc" "${out:+, said:}"
    [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/  /'
    if [ "$rc" -ne 0 ] || { [ "$quiet" = quiet ] && [ -n "$out" ]; }; then status=1; fi
    return 0
}
echo "systemd $(systemd-analyze --version | sed -n '1s/^systemd \([^ ]*\).*/\1/p'), root $root"
check quiet "systemd-analyze verify attnd.service" systemd-analyze verify --root="$root" attnd.service
check any "systemd-sysusers attnd.conf" systemd-sysusers --root="$root" attnd.conf
check quiet "systemd-tmpfiles --create attnd.conf" systemd-tmpfiles --root="$root" --create attnd.conf
grep -q '^attnd:' "$root/etc/passwd" || { echo "no user attnd in $root/etc/passwd"; status=1; }
grep -q '^attnd:' "$root/etc/group" || { echo "no group attnd in $root/etc/group"; status=1; }
[ -d "$root/run/attnd" ] || { echo "no $root/run/attnd"; status=1; }
[ "$(stat -c %a "$root/run/attnd" 2>/dev/null)" = 750 ] || { echo "/run/attnd is not 0750"; status=1; }
grep -q '^Type=notify$' "$unit" || { echo "unit is not Type=notify"; status=1; }
grep -q '^WatchdogSec=' "$unit" || { echo "unit has no WatchdogSec="; status=1; }

# the configuration the unit names, as the installed attnd reads it
exec_line=$(sed -n 's/^ExecStart=//p' "$unit")
cfg=$(printf '%s\n' "$exec_line" | sed -n 's/.*--config \([^ ]*\).*/\1/p')
[ "$cfg" = "$sysconfdir/attnd/attnd.json" ] || { echo "ExecStart names config '$cfg'"; status=1; }
[ -f "$root$cfg" ] || { echo "no default configuration at $root$cfg"; status=1; }
tmp=$(mktemp -d)
if "$root$prefix/bin/attnd" --config "$root$cfg" --listen "ipc://$tmp/a.sock" --engine cpu \
    --ready-fd 3 3>"$tmp/ready" 2>"$tmp/log" & then
    pid=$!
    for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
    if [ -s "$tmp/ready" ]; then
        echo "attnd with $cfg: ready"
    else
        echo "attnd with $cfg did not start:"; cat "$tmp/log"; status=1
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || { echo "attnd with $cfg exited $?"; status=1; }
fi
rm -rf "$tmp"
[ $status -eq 0 ] && echo "verify-systemd: clean" || echo "verify-systemd: FAILED"
exit $status
