"""Request files for W4s (docs/strings.md) and the same requests with the strings' ids, so that the
cost of strings is the only difference: OUT/mmoe_strings_nN.jsonl (six categorical features as
strings "fK=VALUE") and OUT/mmoe_ids_nN.jsonl (mmoe's `sparse` with those strings hashed by
Python's xxHash, as the config hashes them).

  /usr/bin/python3 bench/string_requests.py OUT [--rows 1,64,512] [--count 8] [--table-rows 100]
"""
import argparse
import json
import os
import random

import xxhash

STRING_FEATURES = 6


def requests(rows, count, table_rows, seed):
    rng = random.Random(seed)
    strings, ids = [], []
    for _ in range(count):
        sparse = [[rng.randrange(table_rows) for _ in range(20 - STRING_FEATURES)] for _ in range(rows)]
        cats = [["f%d=v%d" % (20 - STRING_FEATURES + j, int(rng.paretovariate(1.05)) % 100000)
                 for j in range(STRING_FEATURES)] for _ in range(rows)]
        dense = [[round(rng.lognormvariate(0, 1), 4) for _ in range(10)] for _ in range(rows)]
        hashed = [[xxhash.xxh64_intdigest(s.encode(), 0) % table_rows for s in row] for row in cats]
        strings.append({"inputs": [
            {"name": "ids", "datatype": "INT64", "shape": [rows, 20 - STRING_FEATURES], "data": sparse},
            {"name": "categories", "datatype": "BYTES", "shape": [rows, STRING_FEATURES], "data": cats},
            {"name": "dense", "datatype": "FP32", "shape": [rows, 10], "data": dense}]})
        ids.append({"inputs": [
            {"name": "sparse", "datatype": "INT64", "shape": [rows, 20],
             "data": [a + b for a, b in zip(sparse, hashed)]},
            {"name": "dense", "datatype": "FP32", "shape": [rows, 10], "data": dense}]})
    return strings, ids


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--rows", default="1,64,512")
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--table-rows", type=int, default=100, help="rows of each mmoe table (100 tiny, 100000 full)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for n in (int(x) for x in a.rows.split(",")):
        strings, ids = requests(n, a.count, a.table_rows, seed=n)
        for name, reqs in (("mmoe_strings", strings), ("mmoe_ids", ids)):
            with open(os.path.join(a.out, "%s_n%d.jsonl" % (name, n)), "w") as f:
                for r in reqs:
                    f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
