"""Behaviour sequences sent as delimited strings ("123,456,789", docs/strings.md): a variant of a DIN
model whose ragged user sequences are BYTES inputs split on a delimiter, and the same requests with
those sequences as strings, so that the strings are the only difference (bench/string_cost.py then
times both, in the engine and served).

  /usr/bin/python3 bench/split_requests.py --repo REPO --model din_full --requests REQUESTS.jsonl --out DIR
      [--delimiter ,] [--pad-digits 0]

Writes REPO/MODEL_split (its config with each ragged INT64 user input as `datatype: BYTES, split:
DELIMITER`, its version folders linked to MODEL's), DIR/MODEL_ids_nN.jsonl (the requests as given)
and DIR/MODEL_split_nN.jsonl (N the requests' candidates; a user's row of each sequence one string).
--pad-digits D writes each id with leading zeros to D digits, the length of real item ids, whose
value the model's tables bound.
"""
import argparse
import json
import os
import re


def split_config(text, inputs, delimiter, name):
    text = re.sub(r"^name: .*$", "name: " + name, text, count=1, flags=re.M)
    for seq in inputs:
        old = "  - name: %s\n    datatype: INT64\n" % seq
        if old not in text:
            raise SystemExit("input %s: expected '%s' in the config" % (seq, old.strip()))
        text = text.replace(old, "  - name: %s\n    datatype: BYTES\n    split: %s\n" % (seq, json.dumps(delimiter)))
    return text


def input_fields(text):
    """Each input of a config as its fields (name, datatype, ragged, scope, ...), in order."""
    blocks = re.split(r"\n  - ", text.split("\noutputs:")[0])[1:]
    return [dict(re.findall(r"^\s*(\w+): (.*)$", b, flags=re.M)) for b in blocks]


def as_strings(request, inputs, delimiter, pad):
    out = json.loads(json.dumps(request))
    for i in out["inputs"]:
        if i["name"] not in inputs:
            continue
        values = i["data"]
        lengths = i.get("parameters", {}).get("lengths", [len(values)])
        rows, at = [], 0
        for n in lengths:
            rows.append(delimiter.join("%0*d" % (pad, v) for v in values[at:at + n]))
            at += n
        i["datatype"], i["shape"], i["data"] = "BYTES", [len(rows)], rows
        i.pop("parameters", None)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repo", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--delimiter", default=",")
    p.add_argument("--pad-digits", type=int, default=0)
    a = p.parse_args()
    with open(os.path.join(a.repo, a.model, "config.yaml")) as f:
        config = f.read()
    fields = input_fields(config)
    inputs = [f["name"] for f in fields
              if f.get("datatype") == "INT64" and f.get("ragged") == "true" and f.get("scope") == "user"]
    candidates = next(f["name"] for f in fields if f.get("scope", "item") == "item")
    if not inputs:
        raise SystemExit(a.model + ": no ragged INT64 user inputs to send as strings")
    name = a.model + "_split"
    folder = os.path.join(a.repo, name)
    text = split_config(config, inputs, a.delimiter, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write(text)
    for version in os.listdir(os.path.join(a.repo, a.model)):
        if version.isdigit() and not os.path.exists(os.path.join(folder, version)):
            os.symlink(os.path.abspath(os.path.join(a.repo, a.model, version)), os.path.join(folder, version))
    with open(a.requests) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    sizes = {next(i["shape"][0] for i in r["inputs"] if i["name"] == candidates) for r in requests}
    n = sizes.pop() if len(sizes) == 1 else "mixed"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "%s_ids_n%s.jsonl" % (a.model, n)), "w") as ids, \
            open(os.path.join(a.out, "%s_split_n%s.jsonl" % (a.model, n)), "w") as strings:
        for r in requests:
            ids.write(json.dumps(r) + "\n")
            strings.write(json.dumps(as_strings(r, inputs, a.delimiter, a.pad_digits)) + "\n")
    print("%s: %s as strings split on %s; %d requests of %s candidates in %s" %
          (name, ", ".join(inputs), json.dumps(a.delimiter), len(requests), n, a.out))


if __name__ == "__main__":
    main()
