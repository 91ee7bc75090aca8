#!/usr/bin/env python3
"""The interpreter behind scripts/docker-replay.sh (read that first).

Parses a Dockerfile (continuation lines, shell and JSON forms, multi-stage
builds, ARG/ENV substitution), makes each stage's Debian base with
debootstrap, runs the steps in a chroot, then runs the final stage as
`docker run` would and checks that attnd answers.  Prints one line per step
with its duration and a summary line at the end; exits non-zero on the first
failing step.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

DEBIAN_BASES = {  # image -> (suite, debootstrap variant)
    "debian:bookworm": ("bookworm", "minbase"),
    "debian:bookworm-slim": ("bookworm", "minbase"),
    "debian:12": ("bookworm", "minbase"),
    "debian:12-slim": ("bookworm", "minbase"),
}
MIRROR = "http://deb.debian.org/debian"
DEBIAN_SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: {suite} {suite}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: {suite}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(msg):
    print(f"docker-replay: {msg}", flush=True)


# ---- Dockerfile parsing -----------------------------------------------------


def logical_lines(text):
    """Instruction lines with continuations joined and comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if cur and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def parse(text):
    """[(INSTRUCTION, argument string)]"""
    steps = []
    for line in logical_lines(text):
        word, _, rest = line.partition(" ")
        steps.append((word.upper(), rest.strip()))
    return steps


def substitute(s, env):
    """${VAR}, ${VAR:-default}, ${VAR:+alt} and $VAR as Docker expands them."""

    def brace(m):
        name, op, word = m.group(1), m.group(2), m.group(3) or ""
        val = env.get(name, "")
        if op == ":-":
            return val if val else word
        if op == ":+":
            return word if val else ""
        return val

    s = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-+])([^}]*))?\}", brace, s)
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", lambda m: env.get(m.group(1), ""), s)


def exec_form(arg):
    """A JSON array (exec form) or a shell-form string -> argv."""
    arg = arg.strip()
    if arg.startswith("["):
        return json.loads(arg)
    return ["/bin/sh", "-c", arg]


def split_flags(arg):
    """Leading --flag=value words (COPY --from=, HEALTHCHECK --interval=)."""
    flags = {}
    words = arg.split(" ")
    while words and words[0].startswith("--"):
        k, _, v = words.pop(0)[2:].partition("=")
        flags[k] = v
        while words and words[0] == "":
            words.pop(0)
    return flags, " ".join(words)


def kv_pairs(arg):
    """ENV/ARG arguments: K=V K2="V 2" or the old `ENV K V` form."""
    words = shlex.split(arg)
    if words and "=" not in words[0] and len(words) >= 2:
        return [(words[0], " ".join(words[1:]))]
    out = []
    for w in words:
        k, eq, v = w.partition("=")
        out.append((k, v if eq else None))
    return out


# ---- .dockerignore ------------------------------------------------------------


def ignore_rules(context):
    path = os.path.join(context, ".dockerignore")
    rules = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            pat = line[1:] if neg else line
            pat = os.path.normpath(pat).lstrip("/")
            rx = ""
            i = 0
            while i < len(pat):
                if pat.startswith("**/", i):
                    rx += "(?:.*/)?"
                    i += 3
                elif pat.startswith("**", i):
                    rx += ".*"
                    i += 2
                elif pat[i] == "*":
                    rx += "[^/]*"
                    i += 1
                elif pat[i] == "?":
                    rx += "[^/]"
                    i += 1
                else:
                    rx += re.escape(pat[i])
                    i += 1
            rules.append((re.compile("^" + rx + "$"), neg))
    return rules


def ignored(rel, rules):
    """Docker's rule: the last matching pattern wins; a match on a parent excludes it all."""
    parts = rel.split("/")
    result = False
    for n in range(1, len(parts) + 1):
        prefix = "/".join(parts[:n])
        for rx, neg in rules:
            if rx.match(prefix):
                result = not neg
        if result:
            return True
    return result


def context_files(context):
    rules = ignore_rules(context)
    for dirpath, dirnames, filenames in os.walk(context):
        reldir = os.path.relpath(dirpath, context)
        keep = []
        for d in dirnames:
            rel = os.path.normpath(os.path.join(reldir, d))
            if ignored(rel, rules):
                continue
            keep.append(d)
            if os.path.islink(os.path.join(dirpath, d)):
                yield rel
        dirnames[:] = [d for d in keep if not os.path.islink(os.path.join(dirpath, d))]
        for f in filenames:
            rel = os.path.normpath(os.path.join(reldir, f))
            if not ignored(rel, rules):
                yield rel


# ---- roots, mounts, chroot ----------------------------------------------------


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def base_tar(work, image):
    if image not in DEBIAN_BASES:
        raise SystemExit(f"docker-replay: cannot make base image {image!r} (only Debian bases "
                         "can be made with debootstrap here)")
    suite, variant = DEBIAN_BASES[image]
    tar = os.path.join(work, f"base-{suite}-{variant}.tar")
    if os.path.exists(tar):
        return tar, 0.0
    t0 = time.time()
    tmp = os.path.join(work, f"debootstrap-{suite}")
    safe_rmtree(tmp)
    log(f"debootstrap --variant={variant} {suite} from {MIRROR}")
    run(["debootstrap", f"--variant={variant}", suite, tmp, MIRROR], stdout=subprocess.DEVNULL)
    # as Docker's debian images: apt sources with updates and security
    os.makedirs(os.path.join(tmp, "etc/apt/sources.list.d"), exist_ok=True)
    with open(os.path.join(tmp, "etc/apt/sources.list.d/debian.sources"), "w") as f:
        f.write(DEBIAN_SOURCES.format(suite=suite))
    sl = os.path.join(tmp, "etc/apt/sources.list")
    if os.path.exists(sl):
        os.unlink(sl)
    shutil.rmtree(os.path.join(tmp, "var/cache/apt/archives"), ignore_errors=True)
    os.makedirs(os.path.join(tmp, "var/cache/apt/archives/partial"), exist_ok=True)
    run(["tar", "-C", tmp, "-cf", tar + ".part", "."])
    os.rename(tar + ".part", tar)
    safe_rmtree(tmp)
    return tar, time.time() - t0


def mounts_under(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    return [m for m in points if m == path or m.startswith(path + "/")]


def safe_rmtree(path):
    """Remove a stage root, never while something is mounted in it (a bind of /dev)."""
    if not os.path.exists(path):
        return
    left = mounts_under(path)
    if left:
        log(f"not removing {path}: still mounted: {' '.join(left)}")
        return
    shutil.rmtree(path, ignore_errors=True)


class Root:
    """A stage's root directory with /proc and /dev mounted while in use."""

    def __init__(self, path, tar):
        self.path = path
        self.mounts = []
        safe_rmtree(path)
        if os.path.exists(path):
            raise SystemExit(f"docker-replay: {path} is in the way")
        os.makedirs(path)
        run(["tar", "-C", path, "-xf", tar])
        shutil.copy("/etc/resolv.conf", os.path.join(path, "etc/resolv.conf"))
        for src, dst, how in (("proc", "proc", "proc"), ("/dev", "dev", "bind"),
                              ("/dev/pts", "dev/pts", "bind")):
            target = os.path.join(path, dst)
            os.makedirs(target, exist_ok=True)
            if how == "proc":
                run(["mount", "-t", "proc", "proc", target])
            else:
                run(["mount", "--bind", src, target])
            self.mounts.append(target)

    def unmount(self):
        for m in reversed(self.mounts):
            if subprocess.run(["umount", m]).returncode != 0:
                subprocess.run(["umount", "-l", m])
        self.mounts = []

    def ids(self, user):
        """uid:gid for a USER value (name or number), read from the root's passwd."""
        name, _, group = user.partition(":")
        uid = gid = None
        for line in open(os.path.join(self.path, "etc/passwd")):
            f = line.split(":")
            if f[0] == name or f[2] == name:
                uid, gid = f[2], f[3]
        if uid is None:
            raise SystemExit(f"docker-replay: USER {user}: no such user in the stage")
        if group:
            for line in open(os.path.join(self.path, "etc/group")):
                f = line.split(":")
                if f[0] == group or f[2] == group:
                    gid = f[2]
        return f"{uid}:{gid}"

    def argv(self, argv, env, workdir, user):
        spec = ["--userspec=" + self.ids(user)] if user not in ("", "root", "0") else []
        envv = [f"{k}={v}" for k, v in env.items()]
        inner = ["/usr/bin/env", "-i"] + envv + ["/bin/sh", "-c", 'cd "$0" && exec "$@"', workdir]
        return ["chroot"] + spec + [self.path] + inner + argv


def copy_into(src, dst):
    """COPY semantics: a directory's contents into dst, a file to dst (or into dst/)."""
    if os.path.isdir(src) and not os.path.islink(src):
        os.makedirs(dst, exist_ok=True)
        run(["cp", "-a", src.rstrip("/") + "/.", dst])
    else:
        if dst.endswith("/") or os.path.isdir(dst):
            os.makedirs(dst, exist_ok=True)
            dst = os.path.join(dst, os.path.basename(src))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        run(["cp", "-a", src, dst])


# ---- the replay ---------------------------------------------------------------


def parse_only(steps, context, build_args):
    """Check what can be checked without a root: every instruction known, the
    COPY sources of the context present after .dockerignore, --from names an
    earlier stage; print each step."""
    env, names, files, bad = dict(build_args), [], set(context_files(context)), 0
    known = {"FROM", "ARG", "ENV", "WORKDIR", "USER", "COPY", "RUN", "ENTRYPOINT", "CMD",
             "HEALTHCHECK", "VOLUME", "EXPOSE", "LABEL", "STOPSIGNAL", "SHELL"}
    for inst, arg in steps:
        note = ""
        if inst not in known:
            note, bad = "unknown instruction", bad + 1
        elif inst == "ARG":
            for k, v in kv_pairs(arg):
                env.setdefault(k, v or "")
        elif inst == "FROM":
            words = substitute(arg, env).split()
            names.append(words[2] if len(words) >= 3 else str(len(names)))
            note = "debootstrap" if words[0] in DEBIAN_BASES else "not replayable here"
        elif inst == "COPY":
            flags, rest = split_flags(arg)
            srcs = substitute(rest, env).split()[:-1]
            if "from" in flags:
                if flags["from"] not in names:
                    note, bad = f"--from={flags['from']}: no such stage", bad + 1
            else:
                for s in srcs:
                    b = os.path.normpath(s)
                    if b != "." and b not in files and not any(f.startswith(b + "/") for f in files):
                        note, bad = f"{s}: not in the context", bad + 1
        print(f"{inst:11} {arg[:90]}{'...' if len(arg) > 90 else ''}{'   # ' + note if note else ''}")
    print(f"{len(steps)} steps, {len(names)} stages, {bad} problems; context {len(files)} files")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", required=True)
    ap.add_argument("--dockerfile", default="Dockerfile")
    ap.add_argument("--build-arg", action="append", default=[])
    ap.add_argument("--work", default="/var/tmp/attnd-docker-replay")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-run", default=None)
    ap.add_argument("--run-timeout", type=float, default=30.0)
    ap.add_argument("--parse-only", action="store_true",
                    help="print the steps as parsed (bases, COPY sources in the context) and stop")
    ap.add_argument("--health-url", default=None,
                    help="also GET this URL (e.g. http://127.0.0.1:9464/health/ready when the "
                    "image's CMD serves --metrics there; the chroot shares the host's network)")
    a = ap.parse_args()

    context = os.path.abspath(a.context)
    dockerfile = os.path.join(context, a.dockerfile)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    build_args = dict(kv.split("=", 1) for kv in a.build_arg)
    steps = parse(open(dockerfile).read())
    if a.parse_only:
        return parse_only(steps, context, build_args)
    t_all = time.time()
    timings = []

    global_args = {}
    stages = []  # [{name, root, env, workdir, user, entrypoint, cmd, healthcheck}]
    roots = []
    try:
        for inst, arg in steps:
            st = stages[-1] if stages else None
            if inst == "ARG" and st is None:
                for k, v in kv_pairs(arg):
                    global_args[k] = build_args.get(k, v or "")
                continue
            if inst == "FROM":
                words = substitute(arg, global_args).split()
                image = words[0]
                name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
                tar, dt = base_tar(work, image)
                if dt:
                    timings.append(("debootstrap", dt))
                    log(f"base {image}: debootstrapped in {dt:.0f} s")
                t0 = time.time()
                root = Root(os.path.join(work, f"stage-{len(stages)}"), tar)
                roots.append(root)
                stages.append({"name": name, "root": root, "env": {"PATH": PATH, "HOME": "/root"},
                               "args": {}, "workdir": "/", "user": "root", "entrypoint": None,
                               "cmd": None, "healthcheck": None, "image": image})
                log(f"FROM {image} AS {name}: root {root.path} ({time.time() - t0:.0f} s)")
                continue
            if st is None:
                raise SystemExit(f"docker-replay: {inst} before FROM")
            env_all = dict(st["env"])
            env_all.update(st["args"])
            if inst == "ARG":
                for k, v in kv_pairs(arg):
                    st["args"][k] = build_args.get(k, global_args.get(k, v or ""))
            elif inst == "ENV":
                for k, v in kv_pairs(arg):
                    st["env"][k] = substitute(v or "", env_all)
            elif inst == "WORKDIR":
                wd = substitute(arg, env_all)
                st["workdir"] = wd if wd.startswith("/") else os.path.join(st["workdir"], wd)
                os.makedirs(st["root"].path + st["workdir"], exist_ok=True)
            elif inst == "USER":
                st["user"] = substitute(arg, env_all)
            elif inst == "COPY":
                flags, rest = split_flags(arg)
                words = substitute(rest, env_all).split()
                srcs, dst = words[:-1], words[-1]
                if not dst.startswith("/"):
                    dst = os.path.join(st["workdir"], dst) + ("/" if dst.endswith("/") or dst == "." else "")
                t0 = time.time()
                droot = st["root"].path + dst
                if "from" in flags:
                    src_stage = next(s for s in stages if s["name"] == flags["from"])
                    for s in srcs:
                        copy_into(src_stage["root"].path + s, droot)
                else:
                    files = list(context_files(context))
                    for s in srcs:
                        base = os.path.normpath(s)
                        if base == "." or os.path.isdir(os.path.join(context, base)):
                            for f in files:  # a directory: its contents into dst
                                if base == "." or f.startswith(base + "/"):
                                    rel = f if base == "." else os.path.relpath(f, base)
                                    copy_into(os.path.join(context, f), os.path.join(droot, rel))
                        elif base in files:
                            copy_into(os.path.join(context, base), droot)
                        else:
                            raise SystemExit(f"docker-replay: COPY {s}: not in the build context")
                dt = time.time() - t0
                timings.append((f"COPY {rest[:40]}", dt))
                log(f"COPY {rest}: {dt:.1f} s")
            elif inst == "RUN":
                if a.skip_run and re.search(a.skip_run, arg):
                    log(f"RUN {arg[:70]}: skipped (--skip-run)")
                    continue
                t0 = time.time()
                log(f"RUN {arg[:100]}{'...' if len(arg) > 100 else ''}")
                argv = exec_form(arg)
                p = subprocess.run(st["root"].argv(argv, env_all, st["workdir"], st["user"]),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                dt = time.time() - t0
                timings.append((f"RUN {arg[:40]}", dt))
                tail = "\n".join(p.stdout.strip().splitlines()[-12:])
                if p.returncode != 0:
                    print(tail)
                    raise SystemExit(f"docker-replay: RUN failed with exit {p.returncode} after {dt:.0f} s")
                if tail:
                    print("    " + tail.replace("\n", "\n    "))
                log(f"  ok in {dt:.0f} s")
            elif inst == "ENTRYPOINT":
                st["entrypoint"] = exec_form(arg)
            elif inst == "CMD":
                st["cmd"] = exec_form(arg)
            elif inst == "HEALTHCHECK":
                flags, rest = split_flags(arg)
                if rest.upper().startswith("CMD"):
                    st["healthcheck"] = (flags, exec_form(rest[3:].strip()))
            elif inst in ("VOLUME", "EXPOSE", "LABEL", "STOPSIGNAL", "SHELL"):
                pass
            else:
                raise SystemExit(f"docker-replay: cannot replay {inst}")

        # ---- docker run of the final stage ----
        st = stages[-1]
        t0 = time.time()
        argv = (st["entrypoint"] or []) + (st["cmd"] or [])
        log(f"run: {' '.join(argv)} as {st['user']}")
        logpath = os.path.join(work, "attnd.log")
        with open(logpath, "w") as lf:
            daemon = subprocess.Popen(st["root"].argv(argv, st["env"], st["workdir"], st["user"]),
                                      stdout=lf, stderr=subprocess.STDOUT)
        healthy = False
        flags, hc = st["healthcheck"] or ({}, None)
        deadline = time.time() + a.run_timeout
        while hc is not None and time.time() < deadline and daemon.poll() is None:
            p = subprocess.run(st["root"].argv(hc, st["env"], "/", st["user"]),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=10)
            if p.returncode == 0:
                healthy = True
                break
            time.sleep(0.5)
        t_healthy = time.time() - t0
        if hc is not None:
            log(f"HEALTHCHECK {' '.join(hc)}: {'healthy' if healthy else 'UNHEALTHY'} "
                f"after {t_healthy:.1f} s")
        hello = subprocess.run(st["root"].argv(["attnctl", "hello", "--url", "ipc:///run/attnd/attnd.sock"],
                                               st["env"], "/", st["user"]),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        answered = hello.returncode == 0
        # the identity fields of the reply, for the log
        keys = re.findall(r'"(version|build_id|artifact)"\s*:\s*"([^"]*)"', hello.stdout)
        summary = ", ".join(f"{k}={v}" for k, v in dict(keys).items())
        log(f"attnctl hello: {'answered' if answered else 'FAILED'} {summary}")
        health_ok = True
        if a.health_url:
            import urllib.request
            try:
                with urllib.request.urlopen(a.health_url, timeout=5) as r:
                    health_ok = r.status == 200
                    log(f"GET {a.health_url}: {r.status} {r.read(200).decode(errors='replace').strip()}")
            except Exception as e:  # a refused connection or an HTTP error status
                health_ok = False
                log(f"GET {a.health_url}: FAILED ({e})")
        daemon.send_signal(signal.SIGTERM)
        try:
            rc = daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            rc = daemon.wait()
        log(f"SIGTERM: attnd exited {rc}")
        print("    " + open(logpath).read().strip().replace("\n", "\n    "))
        timings.append(("run + healthcheck + hello + stop", time.time() - t0))
        total = time.time() - t_all
        ok = answered and health_ok and rc == 0 and (healthy or hc is None)
        log("timings: " + ", ".join(f"{n} {t:.0f} s" for n, t in timings))
        log(f"{'PASS' if ok else 'FAIL'}: {a.dockerfile} replayed in {total:.0f} s "
            f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.uname().nodename})")
        return 0 if ok else 1
    finally:
        for r in roots:
            r.unmount()
        if not a.keep:
            for r in roots:
                safe_rmtree(r.path)


if __name__ == "__main__":
    sys.exit(main())
