import json,sys,glob
f=[x for x in sorted(glob.glob(sys.argv[1]+"/decode-h200-*.json")) if "partial" not in x] or sorted(glob.glob(sys.argv[1]+"/decode-h200-*.json"))
if not f: sys.exit("no json in "+sys.argv[1])
d=json.load(open(f[-1]))
for r in d["shapes"]:
    print("%-18s" % r["shape"], " ".join("%s=%.1f" % (k.replace("attnd_",""), v["us"]) for k,v in r["peers"].items() if isinstance(v,dict) and v.get("us")))
for e in d.get("errors",[])[:5]: print("error:", e[:200])
