#!/usr/bin/python3
"""Makes a keyed copy of a model for benchmarks (docs/embedding.md, "Keyed tables"): every embedding
table `rankd inspect` lists becomes keyed (tables.keyed), its keys the row numbers in a shuffled
order, so the copy takes the original's requests unchanged and each id is looked up through the
table's key index before its row is read. The vectors are zeros: the timing does not depend on them.

    bench/keyed_model.py RANKD REPO MODEL    writes REPO/MODEL_keyed
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np


def main():
    rankd, repo, model = sys.argv[1:4]
    listing = subprocess.run(rankd.split() + ["inspect", "--model-repo", repo, "--model", model],
                             check=True, capture_output=True, text=True).stdout
    tables = re.findall(r"^  (\S+)\s+(?:gpu|cache|host)\s+\[(\d+), (\d+)\]", listing, re.M)
    if not tables:
        sys.exit("no tables in `rankd inspect`'s listing of " + model)
    out = os.path.join(repo, model + "_keyed")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(os.path.join(repo, model), out)
    rng = np.random.default_rng(1)
    keyed = ["  keyed:"]
    for name, rows, dim in tables:
        folder = os.path.join(out, "sparse", name)
        os.makedirs(folder)
        rng.permutation(int(rows)).astype("<i8").tofile(os.path.join(folder, "key"))
        np.zeros(int(rows) * int(dim), dtype="<f4").tofile(os.path.join(folder, "emb_vector"))
        keyed.append("    %s: {path: sparse/%s}" % (name, name))
    path = os.path.join(out, "config.yaml")
    with open(path) as f:
        config = f.read().replace("name: " + model, "name: " + model + "_keyed")
    if re.search(r"^tables:", config, re.M):
        config = re.sub(r"^tables:.*$", lambda m: m.group(0) + "\n" + "\n".join(keyed), config, count=1, flags=re.M)
    else:
        config += "tables:\n" + "\n".join(keyed) + "\n"
    with open(path, "w") as f:
        f.write(config)
    print("%s: %d tables keyed" % (out, len(tables)))


if __name__ == "__main__":
    main()
