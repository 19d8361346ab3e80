# python3 workload for the allocator tests (run with PYTHONMALLOC=malloc so that
# every object goes through the allocator under test).  Deterministic.
import json, random, re, sys, collections
n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
rnd = random.Random(42)
syll = "ka lo mi nu pe ra si tu vo xe za qu".split()
words = ["".join(rnd.choice(syll) for _ in range(rnd.randint(1, 5))) for _ in range(n)]
c = collections.Counter(words)
print("distinct", len(c), "top", c.most_common(5))
d = {}
for i, w in enumerate(words):
    d[w + str(i % 97)] = {"i": i, "w": w, "l": list(range(i % 23)), "s": w * (i % 7)}
    if i % 5 == 0:
        d.pop(words[i // 2] + str((i // 2) % 97), None)
print("dict", len(d))
blob = json.dumps(d, sort_keys=True)
print("json", len(blob), sum(blob.encode()) % 1000003)
back = json.loads(blob)
print("roundtrip", back == d)
text = " ".join(words)
print("regex", len(re.findall(r"\b(?:ka|mi)\w{2,6}\b", text)))
rows = sorted(((len(w), w) for w in set(words)), reverse=True)[:5]
print("longest", rows)
acc = []
for i in range(n):
    acc.append(("%05d:%s" % (i, words[i])).upper())
    if len(acc) > 2000:
        acc = acc[1000:]
print("acc", len(acc), acc[-1])
t = tuple(frozenset(w[:3] for w in words[j:j + 50]) for j in range(0, n, 50))
print("frozensets", len(t), sum(len(x) for x in t))
