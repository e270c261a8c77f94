#!/usr/bin/env python3
# lotus — lotus-tool test: render `report` in headless Chromium; not blank, no JS errors
# SPDX-License-Identifier: MIT
"""report_screenshot.py LOTUS_TOOL GEN_TRACE WORK_DIR [ATTRIBUTION_JSON]   (77 = skipped: no chromium)"""
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib


def decode_png(path):
    """Returns (width, height, channels, rows of bytes) for 8-bit RGB/RGBA PNGs."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride, rows, prev = w * ch, [], bytearray(w * ch)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        rows.append(line)
        prev = line
    return w, h, ch, rows


def main():
    tool, gen, work = sys.argv[1:4]
    attribution = sys.argv[4] if len(sys.argv) > 4 else None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium not installed")
        return 77
    os.makedirs(work, exist_ok=True)
    trace = os.path.join(work, "trace")
    shutil.rmtree(trace, ignore_errors=True)
    subprocess.run([sys.executable, gen, trace, "--records", "20000", "--epochs", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    html = os.path.join(work, "report.html")
    extra = ["--attribution", attribution] if attribution else []
    subprocess.run([tool, "report", trace, "-o", html] + extra, check=True)
    text = open(html, encoding="utf-8").read()
    if attribution:
        assert 'id="attr"' in text, "attribution chart missing"
    for bad in ("http://", "https://", "<script src", "<link", "@import"):
        assert bad not in text, "report is not self-contained: " + bad
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + os.path.join(work, "profile"), "--window-size=1280,2000"]
    url = "file://" + os.path.abspath(html)
    png = os.path.join(work, "report.png")
    if os.path.exists(png):
        os.remove(png)
    subprocess.run([chromium] + flags + ["--screenshot=" + png, url], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    dom = subprocess.run([chromium] + flags + ["--dump-dom", url], check=True, timeout=120,
                         capture_output=True, text=True).stdout
    # The script spells its markers in two pieces, so only the rendered DOM can match these.
    errors = re.search(r'<div id="lotus-errors"[^>]*>(.*?)</div>', dom, re.S)
    assert errors is not None, "error box missing from the DOM"
    assert "LOTUS_JS_ERROR" not in dom and errors.group(1).strip() == "", errors.group(1)
    assert '<div id="lotus-status">LOTUS_REPORT_RENDERED</div>' in dom, "page script did not finish"
    w, h, ch, rows = decode_png(png)
    non_white = colored = 0
    for line in rows:
        for x in range(0, w * ch, ch):
            r, g, b = line[x], line[x + 1], line[x + 2]
            if r < 240 or g < 240 or b < 240:
                non_white += 1
            if max(r, g, b) - min(r, g, b) > 60:
                colored += 1
    share = non_white / (w * h)
    print(f"{w}x{h} screenshot: {100 * share:.2f}% non-white, {colored} coloured pixels")
    assert share > 0.02, "screenshot is (almost) blank"
    assert colored > 2000, "no chart colours in the screenshot"
    return 0


if __name__ == "__main__":
    sys.exit(main())
