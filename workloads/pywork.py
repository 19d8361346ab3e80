"""heaplab workload: a mix of what Python programs allocate.

Run with PYTHONMALLOC=malloc so that every object goes through malloc.
Usage: python3 pywork.py VARIANT SCALE   (deterministic output)
"""
import json
import random
import sys


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


def words(rng, n, vocab):
    return [vocab[min(int(rng.paretovariate(1.2)) - 1, len(vocab) - 1)] for _ in range(n)]


def main():
    variant = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    rng = random.Random(1000 + variant)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    vocab = ["".join(rng.choice(letters[: 8 + 4 * variant]) for _ in range(rng.randint(2, 9 + variant)))
             for _ in range(2000 * variant)]
    n = int(60000 * scale)

    counts = {}
    for w in words(rng, n, vocab):
        counts[w] = counts.get(w, 0) + 1

    # A tree of small objects, built and torn down in waves.
    total = 0
    for wave in range(4 + variant):
        root = Node("root", 0)
        stack = [root]
        for i in range(n // (4 + variant)):
            node = Node(vocab[i % len(vocab)], i)
            stack[rng.randrange(len(stack))].children.append(node)
            if i % 7 == 0:
                stack.append(node)
        total += len(stack)

    # Strings: formatting, joining, slicing.
    lines = ["%s=%d;%s" % (w, c, w[::-1]) for w, c in sorted(counts.items())]
    blob = "\n".join(lines)
    pieces = blob.split(";")

    # JSON round trips of nested data.
    records = [{"id": i, "tags": words(rng, 3 + variant, vocab), "score": i * 0.5} for i in range(n // 20)]
    back = json.loads(json.dumps(records))

    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    print("distinct", len(counts), "nodes", total, "pieces", len(pieces), "records", len(back))
    for w, c in top:
        print("%6d %s" % (c, w))


main()
