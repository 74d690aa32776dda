#!/usr/bin/env python3
"""Render the topology picture of every spec example and screenshot it in headless Chromium.

    .venv/bin/python scripts/render_pictures.py                 # all 9 examples -> docs/pictures/
    .venv/bin/python scripts/render_pictures.py --out /tmp/pics --only hetero-18-nodes
    .venv/bin/python scripts/render_pictures.py --no-screenshot # SVG/HTML only, no browser needed

Each example is planned with the inventory its row in tests/data/spec_examples/README.md names
(`--nodes ...`), then written as NAME.svg and NAME.html; the script checks that the SVG shows every
worker of the plan, and screenshots NAME.svg and NAME.html to NAME.png and NAME.page.png with Chromium
(install it with `apt-get install -y chromium` on Debian/Ubuntu). Exit status 1 if any example fails.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.viz.check import missing_workers
from rlplace.viz.picture import html, svg

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "data" / "spec_examples"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_ROW = re.compile(r"^\|\s*([\w.-]+\.yaml)\s*\|\s*`--nodes\s+([^`]+)`")
PAGE_EXTRA = (80, 600)  # the HTML page screenshot: picture size plus room for the heading and first rows


def examples(folder: pathlib.Path = EXAMPLES) -> list[tuple[pathlib.Path, str]]:
    """(example file, --nodes spec) for every row of the examples README's table, in table order."""
    rows = [_ROW.match(line) for line in (folder / "README.md").read_text(encoding="utf-8").splitlines()]
    return [(folder / m.group(1), m.group(2).strip()) for m in rows if m]


def find_browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def svg_size(svg_text: str) -> tuple[int, int]:
    """The picture's natural size in px: its viewBox (its width is 100% of the page, up to that size)."""
    _, _, width, height = (float(v) for v in ET.fromstring(svg_text).get("viewBox", "0 0 0 0").split())
    return round(width), round(height)


def png_size(path: pathlib.Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (no imaging library needed)."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def png_pixels(path: pathlib.Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit non-interlaced RGB or RGBA PNG, as Chromium writes them
    (stdlib only: zlib and the five PNG row filters)."""
    data = path.read_bytes()
    width, height = png_size(path)
    depth, colour, interlace = data[24], data[25], data[28]
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{path}: PNG bit depth {depth}, colour type {colour}, interlace {interlace} not supported")
    chunks, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            chunks.append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        previous = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
    return width, height, rows


def screenshot(browser: str, page: pathlib.Path, png: pathlib.Path, size: tuple[int, int]) -> None:
    """Headless Chromium, a throwaway profile, no network chatter; raises with Chromium's output on failure."""
    proc = _chromium(browser, page, size, f"--screenshot={png}")
    if proc.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium failed on {page.name} (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")


def dump_dom(browser: str, page: pathlib.Path, size: tuple[int, int]) -> str:
    """The page's DOM after it loaded (and ran its scripts) in a window of `size`: how a test measures where
    Chromium laid things out."""
    proc = _chromium(browser, page, size, "--dump-dom")
    if proc.returncode != 0:
        raise RuntimeError(f"chromium failed on {page.name} (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return proc.stdout


def _chromium(browser: str, page: pathlib.Path, size: tuple[int, int], *what: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="rlplace-chromium-") as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *what,
            f"--window-size={size[0]},{size[1]}",
            page.resolve().as_uri(),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def render(example: pathlib.Path, nodes: str, out: pathlib.Path, browser: str | None) -> list[str]:
    """Write one example's pictures; return a line per file written (raises on any shortfall)."""
    inventory = parse_nodes(nodes)
    result = plan(load(example), inventory)
    picture = svg(result, inventory)
    missing = missing_workers(result, picture)
    if missing:
        raise AssertionError(f"{len(missing)} workers missing from the picture, e.g. {missing[:5]}")
    name = example.stem
    (out / f"{name}.svg").write_text(picture, encoding="utf-8")
    (out / f"{name}.html").write_text(html(result, inventory), encoding="utf-8")
    lines = [f"{name}.svg: {len(result.workers)} workers on --nodes {nodes}, all shown"]
    if browser:
        width, height = svg_size(picture)
        for page, png, size in (
            (out / f"{name}.svg", out / f"{name}.png", (width, height)),
            (out / f"{name}.html", out / f"{name}.page.png", (width + PAGE_EXTRA[0], height + PAGE_EXTRA[1])),
        ):
            png.unlink(missing_ok=True)
            screenshot(browser, page, png, size)
            lines.append(f"{png.name}: {png_size(png)[0]}x{png_size(png)[1]} px, {png.stat().st_size // 1024} KiB")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "pictures")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="example names (file stems)")
    ap.add_argument("--no-screenshot", action="store_true", help="skip Chromium")
    args = ap.parse_args(argv)
    browser = None if args.no_screenshot else find_browser()
    if not args.no_screenshot and browser is None:
        print(f"no Chromium found (looked for {', '.join(BROWSERS)}); use --no-screenshot", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for example, nodes in examples():
        if args.only and example.stem not in args.only:
            continue
        try:
            for line in render(example, nodes, args.out, browser):
                print(line)
        except Exception as e:  # report every example, keep going
            failed += 1
            print(f"{example.name}: FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
