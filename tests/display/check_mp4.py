#!/usr/bin/env python3
"""An independent reader of MP4 box structure (ISO/IEC 14496-12), standard library only.

    check_mp4.py FILE FRAMES WIDTH HEIGHT

Checks: the file is a sequence of boxes whose sizes add up to the file size; ftyp first; one moov
and one mdat; a video track (hdlr 'vide') whose sample description is 'avc1' with the given width
and height; stsz counting FRAMES samples, every sample inside the mdat payload (stco/co64 chunk
offsets with stsc runs); mvhd with a positive time scale.
"""
import struct
import sys


def fail(message):
    print("check_mp4: " + message, file=sys.stderr)
    sys.exit(1)


def boxes(data, start, end):
    out, offset = [], start
    while offset < end:
        if offset + 8 > end:
            fail("truncated box header at %d" % offset)
        size, kind = struct.unpack_from(">I4s", data, offset)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, offset + 8)
            header = 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            fail("box %r at %d has size %d past its parent" % (kind, offset, size))
        out.append((kind.decode("latin-1"), offset + header, offset + size))
        offset += size
    return out


def child(data, parent, kind):
    found = [b for b in boxes(data, parent[1], parent[2]) if b[0] == kind]
    if not found:
        fail("no %s box" % kind)
    return found[0]


def main():
    path, frames, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    data = open(path, "rb").read()
    top = boxes(data, 0, len(data))
    if not top or top[0][0] != "ftyp":
        fail("ftyp is not the first box")
    kinds = [b[0] for b in top]
    if kinds.count("moov") != 1 or kinds.count("mdat") != 1:
        fail("expected one moov and one mdat, found %s" % kinds)
    moov = top[kinds.index("moov")]
    mdat = top[kinds.index("mdat")]
    mvhd = child(data, moov, "mvhd")
    version = data[mvhd[1]]
    (timescale,) = struct.unpack_from(">I", data, mvhd[1] + (20 if version == 1 else 12))
    if timescale <= 0:
        fail("mvhd time scale %d" % timescale)
    video = None
    for trak in [b for b in boxes(data, moov[1], moov[2]) if b[0] == "trak"]:
        mdia = child(data, trak, "mdia")
        hdlr = child(data, mdia, "hdlr")
        if data[hdlr[1] + 8:hdlr[1] + 12] == b"vide":
            video = (trak, mdia)
    if video is None:
        fail("no video track")
    stbl = child(data, child(data, video[1], "minf"), "stbl")
    stsd = child(data, stbl, "stsd")
    entry = boxes(data, stsd[1] + 8, stsd[2])[0]
    if entry[0] != "avc1":
        fail("sample description %s, not avc1" % entry[0])
    w, h = struct.unpack_from(">HH", data, entry[1] + 24)
    if (w, h) != (width, height):
        fail("avc1 size %dx%d, expected %dx%d" % (w, h, width, height))
    stsz = child(data, stbl, "stsz")
    sample_size, count = struct.unpack_from(">II", data, stsz[1] + 4)
    if count != frames:
        fail("%d samples, expected %d" % (count, frames))
    sizes = [sample_size] * count if sample_size else list(struct.unpack_from(">%dI" % count, data, stsz[1] + 12))
    kinds = [b[0] for b in boxes(data, stbl[1], stbl[2])]
    if "stco" in kinds:
        stco = child(data, stbl, "stco")
        (n,) = struct.unpack_from(">I", data, stco[1] + 4)
        chunks = list(struct.unpack_from(">%dI" % n, data, stco[1] + 8))
    else:
        co64 = child(data, stbl, "co64")
        (n,) = struct.unpack_from(">I", data, co64[1] + 4)
        chunks = list(struct.unpack_from(">%dQ" % n, data, co64[1] + 8))
    stsc = child(data, stbl, "stsc")
    (runs,) = struct.unpack_from(">I", data, stsc[1] + 4)
    table = [struct.unpack_from(">III", data, stsc[1] + 8 + 12 * r) for r in range(runs)]
    sample = 0
    for c, offset in enumerate(chunks, 1):
        per_chunk = [t[1] for t in table if t[0] <= c][-1]
        for _ in range(per_chunk):
            if sample >= count:
                break
            if offset < mdat[1] or offset + sizes[sample] > mdat[2]:
                fail("sample %d lies outside the mdat payload" % sample)
            offset += sizes[sample]
            sample += 1
    if sample != count:
        fail("chunks hold %d of %d samples" % (sample, count))
    print("%s: %d frames, %dx%d avc1" % (path, count, w, h))


if __name__ == "__main__":
    main()
