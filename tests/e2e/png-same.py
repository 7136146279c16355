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
import sys

spec = importlib.util.spec_from_file_location(
    "png_colours", os.path.join(os.path.dirname(__file__), "png-colours.py"))
png_colours = importlib.util.module_from_spec(spec)
spec.loader.exec_module(png_colours)


def pixels(path):
    return png_colours.rgb_rows(path, "png-same")


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
