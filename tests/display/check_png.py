#!/usr/bin/env python3
"""An independent PNG reader (standard library: zlib, struct) and content checks of a rendered orbital.

    check_png.py FILE WIDTH HEIGHT [--density] [--reference REF.png --tolerance T]

Checks the signature, chunk CRCs, IHDR (8-bit RGBA, not interlaced), decodes the IDAT stream with
the five PNG filters, then the picture: the image size; both phase colours present (blue-dominant
pixels of the +iso lobe, red-dominant of the -iso lobe, each at least 0.5% of the image; with
--density, a density's one surface colour, blue-dominant, and no red); the
background (the corner pixel's colour) on at least 20% of the image and on all four corners.
With --reference, the mean absolute difference per channel must stay below T (0..255) and fewer
than 1% of pixels may differ by more than 64 in any channel.
"""
import struct
import sys
import zlib


def fail(message):
    print("check_png: " + message, file=sys.stderr)
    sys.exit(1)


def decode_png(path, colour_types=(6,)):
    """(width, height, channels, rows): 8-bit PNG of colour type 6 (RGBA) or 2 (RGB) when allowed."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s: not a PNG signature" % path)
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        body = data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack_from(">I", data, offset + 8 + length)
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            fail("%s: bad CRC in %s" % (path, kind))
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        offset += 12 + length
    if header is None:
        fail("%s: no IHDR" % path)
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in colour_types or interlace != 0:
        fail("%s: expected 8-bit colour type %s without interlacing, got depth %d colour %d interlace %d" %
             (path, "/".join(map(str, colour_types)), depth, colour, interlace))
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    if len(raw) != height * (stride + 1):
        fail("%s: decoded %d bytes, expected %d" % (path, len(raw), height * (stride + 1)))
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = previous[x]
            c = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif kind != 0:
                fail("%s: unknown filter %d" % (path, kind))
        rows.append(line)
        previous = line
    return width, height, channels, rows


def read_png(path):
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA PNG."""
    width, height, _, rows = decode_png(path)
    return width, height, rows


def main():
    args = sys.argv[1:]
    reference, tolerance = None, None
    density = "--density" in args
    args = [a for a in args if a != "--density"]
    if "--reference" in args:
        i = args.index("--reference")
        reference, tolerance = args[i + 1], float(args[i + 3])
        args = args[:i]
    path, width, height = args[0], int(args[1]), int(args[2])
    w, h, rows = read_png(path)
    if (w, h) != (width, height):
        fail("image is %dx%d, expected %dx%d" % (w, h, width, height))
    pixel = lambda x, y: tuple(rows[y][4 * x:4 * x + 3])
    background = pixel(0, 0)
    for x, y in ((w - 1, 0), (0, h - 1), (w - 1, h - 1)):
        if pixel(x, y) != background:
            fail("corner (%d, %d) is %s, not the background %s" % (x, y, pixel(x, y), background))
    blue = red = back = 0
    for y in range(h):
        for x in range(w):
            r, g, b = pixel(x, y)
            if (r, g, b) == background:
                back += 1
            elif b > r + 40 and b > g + 20:
                blue += 1
            elif r > b + 40 and r > g + 40:
                red += 1
    n = w * h
    if blue < 0.005 * n or (red < 0.005 * n if not density else red > 0):
        fail("phase colours: %d blue and %d red pixels of %d" % (blue, red, n))
    if back < 0.2 * n:
        fail("background on only %d of %d pixels" % (back, n))
    if reference:
        rw, rh, ref = read_png(reference)
        if (rw, rh) != (w, h):
            fail("reference is %dx%d" % (rw, rh))
        total, far = 0, 0
        for y in range(h):
            for x in range(4 * w):
                d = abs(rows[y][x] - ref[y][x])
                total += d
            for x in range(w):
                if max(abs(rows[y][4 * x + k] - ref[y][4 * x + k]) for k in range(3)) > 64:
                    far += 1
        mean = total / (4.0 * n)
        if mean > tolerance or far > 0.01 * n:
            fail("differs from %s: mean |difference| %.2f (limit %.2f), %d pixels off by > 64" % (reference, mean, tolerance, far))
    print("%dx%d: %d blue, %d red, %d background pixels" % (w, h, blue, red, back))


if __name__ == "__main__":
    main()
