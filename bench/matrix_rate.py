"""The GPU's measured bf16 matrix rate: what W1's "half the matrix rate" target is a share of.

  python3 bench/matrix_rate.py [--sizes 4096,8192,16384] [--iters 50] [--pairs-per-s 5.5e6]

Runs on the GPU machine (its python3 has PyTorch). Times square bf16 products (cuBLAS through torch.matmul,
fp32 accumulation, inputs and output already on the device) with CUDA events and prints one JSON
line per size and the best rate. With --pairs-per-s, also the share of that best rate W1
(dlrm_dcnv2, 32.06 MFLOP per pair: WORKLOADS.md) reaches at that throughput.
"""
import argparse
import json

import torch

W1_FLOP_PER_PAIR = 2 * 16_030_464  # multiply-adds per pair: bottom MLP, three low-rank cross layers, top MLP


def rate(n, iters):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        torch.matmul(a, b, out=c)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / iters
    return {"n": n, "ms": round(ms, 4), "tflop_per_s": round(2 * n**3 / (ms * 1e-3) / 1e12, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--pairs-per-s", type=float, default=0.0, help="a W1 throughput to express as a share")
    args = parser.parse_args()
    results = [rate(int(n), args.iters) for n in args.sizes.split(",")]
    for r in results:
        print(json.dumps(r))
    best = max(r["tflop_per_s"] for r in results)
    summary = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "best_tflop_per_s": best}
    if args.pairs_per_s > 0:
        w1 = args.pairs_per_s * W1_FLOP_PER_PAIR / 1e12
        summary.update({"w1_pairs_per_s": args.pairs_per_s, "w1_tflop_per_s": round(w1, 1), "w1_share": round(w1 / best, 3)})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
