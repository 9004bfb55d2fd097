"""The peers rankd is measured against: the model zoo's PyTorch definitions, run by PyTorch itself
(and ONNX Runtime on the CPU where installed), on the same weights and the same requests.

GPU (bench/gpu_bench.py): eager fp32, eager with bf16 autocast, torch.compile, and torch.compile
in reduce-overhead mode (CUDA graphs), the last two in fp32 and with bf16 autocast inside the
compiled function ("compile-bf16", "cudagraphs-bf16"); inputs start in pinned host memory and outputs end in host
memory, as rankd's do. CPU (bench/cpu_bench.py): PyTorch eager and ONNX Runtime's CPU provider.
Each timing returns (median ms, p99 ms) over `iters` calls after a warm-up, rotating the batches.
"""
import time

import torch

GPU_PEERS = ("eager", "bf16", "compile", "cudagraphs", "compile-bf16", "cudagraphs-bf16")


def median_p99(times):
    times = sorted(times)
    return times[len(times) // 2], times[min(len(times) - 1, len(times) * 99 // 100)]


def gpu_peer(name, gpu_model, compiled):
    """The callable of one GPU peer; `compiled` caches the compiled models between shapes."""
    def autocast(*xs):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return gpu_model(*xs)

    if name == "eager":
        return gpu_model
    if name == "bf16":
        return autocast
    if name == "compile":
        return compiled.setdefault(name, torch.compile(gpu_model, dynamic=False))
    if name == "cudagraphs":
        return compiled.setdefault(name, torch.compile(gpu_model, mode="reduce-overhead", dynamic=False))
    if name == "compile-bf16":
        return compiled.setdefault(name, torch.compile(autocast, dynamic=False))
    if name == "cudagraphs-bf16":
        return compiled.setdefault(name, torch.compile(autocast, mode="reduce-overhead", dynamic=False))
    raise ValueError(f"unknown peer '{name}' (one of {', '.join(GPU_PEERS)})")


def _to_host(out):
    if isinstance(out, (tuple, list)):
        return [o.float().cpu() for o in out]
    return out.float().cpu()


def time_gpu(fn, batches, iters, warmup=10, window=None):
    """Host tensors in (pinned), host tensors out; .cpu() synchronises. `window`, a list, gets the timed
    runs' start and end (time.time())."""
    times = []
    with torch.no_grad():
        for i in range(warmup):
            _to_host(fn(*[t.cuda(non_blocking=True) for t in batches[i % len(batches)]]))
        torch.cuda.synchronize()
        began = time.time()
        for i in range(iters):
            b = batches[i % len(batches)]
            t0 = time.perf_counter()
            _to_host(fn(*[t.cuda(non_blocking=True) for t in b]))
            times.append((time.perf_counter() - t0) * 1000)
        if window is not None:
            window[:] = [began, time.time()]
    return median_p99(times)


def time_cpu(model, batches, iters, warmup=5):
    times = []
    with torch.no_grad():
        for i in range(warmup):
            model(*batches[i % len(batches)])
        for i in range(iters):
            b = batches[i % len(batches)]
            t0 = time.perf_counter()
            model(*b)
            times.append((time.perf_counter() - t0) * 1000)
    return median_p99(times)


def time_onnxruntime(path, feats, torch_batches, threads, iters, warmup=5):
    """ONNX Runtime's CPU provider on the exported model; None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feeds = [{f.name: t.numpy() for f, t in zip(feats, b)} for b in torch_batches]
    for i in range(warmup):
        sess.run(None, feeds[i % len(feeds)])
    times = []
    for i in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feeds[i % len(feeds)])
        times.append((time.perf_counter() - t0) * 1000)
    return median_p99(times)
