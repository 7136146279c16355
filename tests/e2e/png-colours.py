# SPDX-License-Identifier: MIT
"""Count the colours of a PNG screenshot, without third-party modules.

    python3 png-colours.py FILE.png

Prints "WIDTHxHEIGHT" on the first line, then one line "RRGGBB COUNT" per
distinct colour, most frequent first (alpha is ignored). Handles what
weston-screenshooter writes through cairo: 8-bit RGB or RGBA, not interlaced.
"""
import struct
import sys
import zlib
from collections import Counter


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(kind, row, prev, bpp):
    if kind == 0:
        return row
    out = bytearray(row)
    n = len(out)
    if kind == 1:
        for i in range(bpp, n):
            out[i] = (out[i] + out[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            out[i] = (out[i] + prev[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = out[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + ((left + prev[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            left = out[i - bpp] if i >= bpp else 0
            upleft = prev[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + paeth(left, prev[i], upleft)) & 0xFF
    else:
        sys.exit("png-colours: unknown filter type %d" % kind)
    return bytes(out)


def rgb_rows(path, prog):
    """Width, height and the rows of PATH as RGB bytes (alpha dropped);
    PROG names the caller in what it says of a file it cannot read."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("%s: %s is not a PNG file" % (prog, path))
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        sys.exit("%s: %s: unsupported PNG (depth %d, colour type %d, "
                 "interlace %d)" % (prog, path, depth, colour_type, interlace))
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytes(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        row = unfilter(raw[start], raw[start + 1:start + 1 + stride], prev,
                       bpp)
        rows.append(b"".join(row[x:x + 3] for x in range(0, stride, bpp)))
        prev = row
    return width, height, rows


def main():
    width, height, rows = rgb_rows(sys.argv[1], "png-colours")
    counts = Counter()
    for row in rows:
        for x in range(0, 3 * width, 3):
            counts[row[x:x + 3]] += 1
    print("%dx%d" % (width, height))
    for colour, count in counts.most_common():
        print("%s %d" % (colour.hex(), count))


if __name__ == "__main__":
    main()
