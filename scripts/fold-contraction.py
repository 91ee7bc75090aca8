#!/usr/bin/env python3
"""How NVVM contracted the fold of split slots (merge_fold, state.h's merges)
into fma.rn.f32, per kernel of one or more PTX files, so two builds, or two
shapes of the reducer, can be checked to round alike without a GPU.

For every `fma.rn.f32 d, a, b, c` whose addend c is a `mul.f32` result:
  F1M0  a slot value loaded by ld.global.cg is a factor of the fma
        (the MLU `l` update: fma(l_slot, beta, alpha * l_acc))
  F0M1  it is a factor of the separate mul instead (the `u` / `O` lane
        update: fma(alpha, acc, beta * slot))
  F0M0  neither (the LSE merge's exp sum, and the producers' own math)
and, for the exp sum, whether the running state's exp or the slot's is the
fma's factor.  Per slot the counts must be the same whatever the shape:
LANES lanes give 2 LANES of F0M1 (u and O), 1 F1M0 and 1 F0M0 per slot.
Also counts `add.f32` / `sub.f32` of a `mul.f32` result, which ptxas could
still fuse (0 expected).

Usage: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -I.
       -ptx kernels/cuda/decode.cu -o new.ptx
       scripts/fold-contraction.py 'merge' old.ptx new.ptx
"""
import collections
import re
import sys

FMA = re.compile(r"fma\.rn\.f32\s+(%\w+),\s*(%\w+),\s*(%\w+),\s*(%\w+);")
MUL = re.compile(r"mul(\.rn)?\.f32\s+(%\w+),\s*(%\w+),\s*(%\w+);")
LDCG = re.compile(r"ld\.global\.cg\S*\s+(\{[^}]*\}|%\w+),")
SUB = re.compile(r"sub\.f32\s+(%\w+),\s*(%\w+),\s*(%\w+);")
EX2 = re.compile(r"ex2\.approx\.ftz\.f32\s+(%\w+),\s*(%\w+);")
ADD = re.compile(r"(add|sub)\.f32\s+(%\w+),\s*(%\w+),\s*(%\w+);")


def kernels(path):
    for m in re.finditer(r"\.entry (\S+)\(.*?\n\}\n", open(path).read(), re.S):
        yield m.group(1), m.group(0)


def fingerprint(body):
    loaded, mul, sub, fma_a, side = set(), {}, {}, {}, {}
    out = collections.Counter()
    plain_mul = set()
    for ln in (x.strip() for x in body.split("\n")):
        m = LDCG.match(ln)
        if m:
            loaded.update(re.findall(r"%\w+", m.group(1)))
            continue
        m = SUB.match(ln)
        if m:
            sub[m.group(1)] = m.group(2)
        m = ADD.match(ln)
        if m and (m.group(3) in plain_mul or m.group(4) in plain_mul):
            out["add(mul)"] += 1
        m = MUL.match(ln)
        if m:
            mul[m.group(2)] = (m.group(3), m.group(4))
            if not m.group(1):
                plain_mul.add(m.group(2))
            continue
        m = FMA.match(ln)
        if m:
            d, a, b, c = m.groups()
            fma_a[d] = a
            if c in mul:
                x, y = mul[c]
                out["F%dM%d" % (a in loaded or b in loaded, x in loaded or y in loaded)] += 1
                fs = "".join(side[r] for r in (a, b) if r in side)
                ms = "".join(side[r] for r in (x, y) if r in side)
                if fs or ms:
                    out[f"expsum fma({fs})+mul({ms})"] += 1
            continue
        m = EX2.match(ln)
        if m:  # the exp's argument: fma chain back to `sub x, m`; slot side when x was loaded
            r = m.group(2)
            for _ in range(4):
                if r in sub:
                    break
                r = fma_a.get(r, r)
            if r in sub:
                side[m.group(1)] = "slot" if sub[r] in loaded else "acc"
    return out


def main():
    pat = re.compile(sys.argv[1])
    for path in sys.argv[2:]:
        for name, body in kernels(path):
            if pat.search(name):
                print(path.split("/")[-1], name[:72], dict(sorted(fingerprint(body).items())))


if __name__ == "__main__":
    main()
