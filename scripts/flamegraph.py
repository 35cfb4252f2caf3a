#!/usr/bin/env python3
"""Renders `perf script` output (sampled call stacks) as a flame graph SVG.

usage: perf script -i perf.data | swift demangle --simplified | scripts/flamegraph.py TITLE > out.svg

Each sample's stack (leaf last in perf's output order reversed) is folded into a path of frame
names; equal paths are counted; the SVG draws one box per frame whose width is its share of
samples, callers below callees. Hovering a box shows the frame, its samples and percentage.
Written for this project (issue 17's before/after profiles); no external tools needed.
"""
import html
import re
import sys
from collections import defaultdict

WIDTH = 1400
ROW = 16
MIN_WIDTH = 0.5  # px: narrower boxes are skipped (their samples still count in the parent)


def frames_of(lines):
    """Yields one list of frames (root first) per sample."""
    stack = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if stack:
                yield list(reversed(stack))
                stack = []
            continue
        if not line.startswith((" ", "\t")):
            # The sample's header line (comm, pid, time, event).
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        name = parts[1]
        name = re.sub(r"\s+\([^()]*\)$", "", name)  # the DSO in parentheses
        name = re.sub(r"\+0x[0-9a-f]+$", "", name)
        stack.append(name)
    if stack:
        yield list(reversed(stack))


def shorten(name):
    # Generic arguments and long parameter lists make boxes unreadable.
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
            continue
        if ch == ">" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out)
    s = re.sub(r"\(.*\)", "(…)", s)
    return s[:200]


class Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name):
        self.name = name
        self.count = 0
        self.children = {}


def build(samples):
    root = Node("all")
    for frames in samples:
        root.count += 1
        node = root
        for f in frames:
            f = shorten(f)
            child = node.children.get(f)
            if child is None:
                child = node.children[f] = Node(f)
            child.count += 1
            node = child
    return root


def color(name):
    h = 0
    for ch in name:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    if name.startswith(("[k]", "__x64", "do_syscall", "entry_SYSCALL")) or re.match(r"^[a-z_0-9]+$", name):
        base = (220, 120 + h % 60, 60)        # kernel and C: orange
    elif "swift_" in name or name.startswith("swift::"):
        base = (120 + h % 60, 170, 220)        # Swift runtime: blue
    else:
        base = (230, 90 + h % 100, 70 + h % 40)  # our code: red-yellow
    return "rgb(%d,%d,%d)" % base


def render(root, title):
    depth = [0]

    def measure(n, d):
        depth[0] = max(depth[0], d)
        for c in n.children.values():
            measure(c, d + 1)

    measure(root, 0)
    height = (depth[0] + 3) * ROW + 40
    total = max(root.count, 1)
    scale = (WIDTH - 20) / total
    out = ['<?xml version="1.0" standalone="no"?>',
           '<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" font-family="monospace" font-size="11">'
           % (WIDTH, height),
           '<rect x="0" y="0" width="100%" height="100%" fill="#fdfdf5"/>',
           '<text x="%d" y="20" text-anchor="middle" font-size="15">%s</text>' % (WIDTH // 2, html.escape(title)),
           '<text x="10" y="36" fill="#555">%d samples; width = share of CPU samples; callers below callees</text>' % total]

    def draw(n, x, d):
        w = n.count * scale
        if w < MIN_WIDTH:
            return
        y = height - (d + 1) * ROW - 4
        pct = 100.0 * n.count / total
        label = n.name
        chars = int(w / 6.6)
        text = label if len(label) <= chars else (label[: max(chars - 1, 0)] + "…" if chars > 2 else "")
        out.append('<g><title>%s (%d samples, %.2f%%)</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" rx="2"/>'
                   '<text x="%.1f" y="%d">%s</text></g>'
                   % (html.escape(label), n.count, pct, x, y, w, ROW - 1, color(label), x + 2, y + ROW - 4, html.escape(text)))
        cx = x
        for c in sorted(n.children.values(), key=lambda c: c.name):
            draw(c, cx, d + 1)
            cx += c.count * scale

    draw(root, 10, 0)
    out.append("</svg>")
    return "\n".join(out)


def main():
    title = sys.argv[1] if len(sys.argv) > 1 else "flame graph"
    root = build(frames_of(sys.stdin))
    sys.stdout.write(render(root, title))


if __name__ == "__main__":
    main()
