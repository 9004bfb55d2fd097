"""The heap's share of a profile's samples, and who called into it.

  perf script -i serve.data -F ip,sym,dso > serve.txt
  /usr/bin/python3 bench/heap_share.py serve.txt [--libc-range 0x98000-0xaf000] [--top 20]

A sample counts as the heap's when its leaf is one of glibc's allocator functions by name (malloc,
free, _int_malloc, malloc_consolidate, ...). A libc without its local symbols (the GPU machine's)
names only malloc and free: --libc-range counts its unnamed addresses in that range as the heap's
too (read the range off `perf report --sort dso,sym` beside the named ones). Each heap sample is
charged to the first named frame outside libc and libstdc++ (with frame-pointer chains a leaf in
libc often has none: `?`; record with --call-graph dwarf where that matters).
"""
import argparse
import collections
import re

HEAP = re.compile(r"^(__GI___libc_)?(malloc|free|cfree.*|realloc|calloc|_int_\w+|malloc_consolidate|unlink_chunk.*|"
                  r"_mid_memalign|__libc_memalign|tcache_\w+)$")
FRAME = re.compile(r"^([0-9a-f]+) (.*) \((.*)\)$")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script", help="perf script -F ip,sym,dso output")
    p.add_argument("--libc-range", default="", help="LOW-HIGH: unnamed libc addresses counted as the heap's")
    p.add_argument("--top", type=int, default=20)
    a = p.parse_args()
    low, high = (int(x, 16) for x in a.libc_range.split("-")) if a.libc_range else (1, 0)
    total, callers = 0, collections.Counter()
    for block in open(a.script).read().split("\n\n"):
        frames = [FRAME.match(l.strip()) for l in block.strip().splitlines()]
        frames = [f for f in frames if f]
        if not frames:
            continue
        total += 1
        ip, sym, dso = int(frames[0].group(1), 16), frames[0].group(2), frames[0].group(3)
        in_libc = "libc.so" in dso or dso == "inlined"  # DWARF chains name inlined frames so
        if not (in_libc and (HEAP.match(sym) or (sym == "[unknown]" and low <= ip <= high))):
            continue
        caller = next((f.group(2) for f in frames[1:] if not any(x in f.group(3) for x in ("libc.so", "libstdc++", "inlined"))
                       and f.group(2) != "[unknown]"), "?")
        callers[caller[:120]] += 1
    heap = sum(callers.values())
    print(f"{total} samples, the heap's {heap} ({100 * heap / max(total, 1):.1f}%)")
    for caller, n in callers.most_common(a.top):
        print(f"{100 * n / max(total, 1):6.2f}%  {caller}")


if __name__ == "__main__":
    main()
