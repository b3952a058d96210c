#!/usr/bin/env python3
"""Checks a browser's screenshot of an orbital viewer page (standard library only).

    test_html_viewer_screenshot.py SHOT.png WIDTH HEIGHT [--reference REF.png]

Reads the PNG with check_png's reader (8-bit RGB or RGBA), then checks: the size; the
background (white, as the page's default) on the four corners; in the middle of the picture
(the central half in each direction) both phase colours, blue-dominant pixels of the +iso lobe
and red-dominant pixels of the -iso lobe, each at least 2% of that region. With --reference (the
CPU renderer's image of the same scene, size and view), the same middle region must classify the
same (background, blue, red, other) on at least 95% of its pixels: the page's camera, framing and
colours are the renderer's, and the two differ only along edges (another rasteriser and
antialiasing) and by float shading.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_png  # noqa: E402  (the independent PNG reader beside this script)


def fail(message):
    print("test_html_viewer_screenshot: " + message, file=sys.stderr)
    sys.exit(1)


def read_png(path):
    """(width, height, rows of (r, g, b)) through check_png's reader, RGB or RGBA."""
    width, height, channels, rows = check_png.decode_png(path, colour_types=(2, 6))
    return width, height, [[tuple(row[x * channels:x * channels + 3]) for x in range(width)] for row in rows]


def classify(rgb):
    r, g, b = rgb
    if min(rgb) >= 235:
        return "background"
    if b > r + 40 and b > g + 20:
        return "blue"
    if r > b + 40 and r > g + 20:
        return "red"
    return "other"


def main():
    args = sys.argv[1:]
    reference = None
    if "--reference" in args:
        i = args.index("--reference")
        reference = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        fail("usage: test_html_viewer_screenshot.py SHOT.png WIDTH HEIGHT [--reference REF.png]")
    width, height, pixels = read_png(args[0])
    if (width, height) != (int(args[1]), int(args[2])):
        fail("size %dx%d, expected %sx%s" % (width, height, args[1], args[2]))
    for x, y in ((0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1)):
        if classify(pixels[y][x]) != "background":
            fail("corner (%d, %d) is %s, not the white background" % (x, y, pixels[y][x]))
    middle = [(x, y) for y in range(height // 4, 3 * height // 4) for x in range(width // 4, 3 * width // 4)]
    counts = {}
    for x, y in middle:
        kind = classify(pixels[y][x])
        counts[kind] = counts.get(kind, 0) + 1
    for kind in ("blue", "red"):
        if counts.get(kind, 0) < 0.02 * len(middle):
            fail("%d %s pixels in the middle (%d pixels): the lobes are not drawn (%s)" %
                 (counts.get(kind, 0), kind, len(middle), counts))
    if reference:
        ref_width, ref_height, ref = read_png(reference)
        if (ref_width, ref_height) != (width, height):
            fail("reference size %dx%d differs" % (ref_width, ref_height))
        same = sum(classify(pixels[y][x]) == classify(ref[y][x]) for x, y in middle)
        if same < 0.95 * len(middle):
            fail("only %d of %d middle pixels classify as in the reference image" % (same, len(middle)))
        print("classes agree on %.1f%% of the middle" % (100.0 * same / len(middle)))
    print("ok: %s" % counts)


if __name__ == "__main__":
    main()
