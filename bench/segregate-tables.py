#!/usr/bin/env python3
"""bench/segregate-tables.py: the closing-note tables of a segregation study
(bench/segregate-study.sh) from its per-program JSON files.

    python3 bench/segregate-tables.py out/seg-study3/{perl-wc,gawk-wc,sqlite}.json

Prints, in Markdown:
  1. identification per new object (callgrind) for SP, STACK, PATH and
     STACK+size, where STACK and PATH decided (the return address alone, one
     frame more, deeper), and each library's instructions per malloc against
     DEFAULT's;
  2. the study's verdict per program (the predictor with the fewest mean
     page faults, its wall and instruction ratios);
  3. the whole program's instructions against DEFAULT's per predictor;
  4. three readings of the page faults against DEFAULT's over the same
     memory sizes: the mean of the per-size ratios (the study's figure), the
     median ratio, and the ratio of the summed faults. The mean is dominated
     by the sizes where DEFAULT's faults beyond the fill approach zero, so it
     moves between recordings; the median shows the medium sizes.
"""
import json
import os
import sys


def fmt(x, n=1):
    return "—" if x is None else f"{x:.{n}f}"


def pct(x):
    return "—" if x is None else f"{100 * x:.1f}%"


def levels(r):
    rep = (r or {}).get("report") or {}
    lv = rep.get("levels") or []
    tot = sum(lv) or 1
    if not lv:
        return None, None, None
    return lv[0] / tot, (lv[1] / tot if len(lv) > 1 else 0.0), sum(lv[2:]) / tot


def main(paths):
    studies = []
    for p in paths:
        with open(p) as f:
            studies.append((os.path.basename(p).removesuffix(".json"), json.load(f)))
    print("| program | DEFAULT instr./malloc | SP ident. (alloc ×DEFAULT) | STACK ident. (×DEFAULT) "
          "| STACK decided at ra / +1 / deeper | PATH ident. (×DEFAULT) | PATH at ra / +1 / deeper "
          "| STACK+size ident. |")
    print("|---|---|---|---|---|---|---|---|")
    for name, d in studies:
        c = d.get("costs")
        if not c:
            continue
        base = c["default"]["per_malloc"]
        pr = {r["name"]: r for r in c["predictors"]}
        ident = lambda n: (pr.get(n) or {}).get("identify_per_object")
        ratio = lambda n: pr[n]["per_malloc"] / base if n in pr and base else None
        s, p = levels(pr.get("STACK")), levels(pr.get("PATH"))
        print(f"| {name} | {fmt(base)} | {fmt(ident('SP'))} ({fmt(ratio('SP'), 2)}) "
              f"| {fmt(ident('STACK'))} ({fmt(ratio('STACK'), 2)}) | {pct(s[0])} / {pct(s[1])} / {pct(s[2])} "
              f"| {fmt(ident('PATH'))} ({fmt(ratio('PATH'), 2)}) | {pct(p[0])} / {pct(p[1])} / {pct(p[2])} "
              f"| {fmt(ident('STACK+size'))} |")
    print()
    print("| program | best | mean faults / DEFAULT | wall / DEFAULT | / glibc | / mimalloc "
          "| its ident. | alloc ×DEFAULT | study says |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, d in studies:
        v = d.get("verdict") or {}
        print(f"| {name} | {v.get('best')} | {fmt(v.get('faults_mean'), 2)} | {fmt(v.get('wall_vs_default'), 2)} "
              f"| {fmt(v.get('wall_vs_glibc'), 2)} | {fmt(v.get('wall_vs_mimalloc'), 2)} "
              f"| {fmt(v.get('identify_per_object'))} | {fmt(v.get('per_malloc_vs_default'), 2)} "
              f"| {'yes' if v.get('pays') else 'no'} |")
    print()
    print("| program | whole-program instructions ×DEFAULT: SP / PATH / STACK / STACK+size | pages ×DEFAULT (best) |")
    print("|---|---|---|")
    for name, d in studies:
        c = d.get("costs")
        if not c:
            continue
        base = c["default"]["program_instructions"] or 1
        pr = {r["name"]: r["program_instructions"] / base for r in c["predictors"]}
        cells = " / ".join(fmt(pr.get(n), 3) for n in ["SP", "PATH", "STACK", "STACK+size"])
        print(f"| {name} | {cells} | {fmt((d.get('verdict') or {}).get('pages_relative'), 2)} |")
    print()
    print("| program | predictor | faults / DEFAULT: mean of ratios | median ratio | ratio of sums |")
    print("|---|---|---|---|---|")
    for name, d in studies:
        curves = {c["name"]: dict(c["points"]) for c in d.get("fault_curves", [])}
        dflt = curves.get("DEFAULT", {})
        for c in d.get("figure4", []):
            if c["name"] == "DEFAULT":
                continue
            rs = sorted(r for _, r in c["points"] if r is not None)
            mine = curves.get(c["name"], {})
            keys = [k for k in dflt if k in mine]
            sd, sp = sum(dflt[k] for k in keys), sum(mine[k] for k in keys)
            mean = sum(rs) / len(rs) if rs else None
            med = rs[len(rs) // 2] if rs else None
            print(f"| {name} | {c['name']} | {fmt(mean, 2)} | {fmt(med, 2)} | {fmt(sp / sd if sd else None, 2)} |")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    main(sys.argv[1:])
