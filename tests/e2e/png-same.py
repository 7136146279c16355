# SPDX-License-Identifier: MIT
"""Compare two PNG screenshots pixel by pixel (alpha ignored).

    python3 png-same.py A.png B.png

Exit status 0 and "same WIDTHxHEIGHT" when every pixel is the same; 1 and
the number of differing pixels, with the first one, otherwise.  Decodes
what png-colours.py decodes (8-bit RGB or RGBA, not interlaced), with its
code.
"""
import importlib.util
import os
import struct
import sys
import zlib

spec = importlib.util.spec_from_file_location(
    "png_colours", os.path.join(os.path.dirname(__file__), "png-colours.py"))
png_colours = importlib.util.module_from_spec(spec)
spec.loader.exec_module(png_colours)


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("png-same: %s is not a PNG file" % path)
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
        sys.exit("png-same: %s: unsupported PNG (depth %d, colour type %d, "
                 "interlace %d)" % (path, depth, colour_type, interlace))
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytes(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        row = png_colours.unfilter(raw[start], raw[start + 1:start + 1 + stride],
                                   prev, bpp)
        rows.append(b"".join(row[x:x + 3] for x in range(0, stride, bpp)))
        prev = row
    return width, height, rows


def main():
    wa, ha, a = pixels(sys.argv[1])
    wb, hb, b = pixels(sys.argv[2])
    if (wa, ha) != (wb, hb):
        print("different sizes: %dx%d and %dx%d" % (wa, ha, wb, hb))
        sys.exit(1)
    diff, first = 0, None
    for y in range(ha):
        if a[y] == b[y]:
            continue
        for x in range(wa):
            if a[y][3 * x:3 * x + 3] != b[y][3 * x:3 * x + 3]:
                diff += 1
                if first is None:
                    first = (x, y, a[y][3 * x:3 * x + 3].hex(),
                             b[y][3 * x:3 * x + 3].hex())
    if diff:
        print("%d of %d pixels differ; first at %d,%d: %s and %s" % (
            (diff, wa * ha) + first))
        sys.exit(1)
    print("same %dx%d" % (wa, ha))


if __name__ == "__main__":
    main()
