#!/usr/bin/env python3
"""Writes the receipts this example attaches: small PNG images whose tEXt chunk holds
what the receipt says (the simulator reads a PNG's tEXt as what it sees), and the cases.
Run again to rebuild them; the output is the same every time."""
import json, struct, zlib
from pathlib import Path

here = Path(__file__).parent


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(text: str, width: int = 64, height: int = 32) -> bytes:
    # A grey image with a darker band per line of the receipt: enough to be a real PNG.
    rows = b"".join(b"\0" + bytes([200 if (y // 4) % 2 else 240]) * width for y in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"tEXt", b"Comment\0" + text.encode())
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


items = [(12.40, 3.10), (8.75, 0.70), (19.99, 1.60), (4.50, 0.36), (31.00, 2.48), (7.25, 0.58),
         (15.80, 1.26), (2.95, 0.24), (44.10, 3.53), (9.60, 0.77), (23.45, 1.88), (6.30, 0.50)]
lines = []
for i, (subtotal, tax) in enumerate(items, 1):
    name = f"r-{i:03d}.png"
    (here / "receipts" / name).write_bytes(png(f"RECEIPT {subtotal:.2f} + {tax:.2f} tax"))
    total = f"{subtotal + tax:.2f}"
    lines.append({"id": f"r-{i:03d}", "vars": {"question": "What is the total, tax included?"},
                  "files": {"receipt": f"receipts/{name}"}, "expected": total})
(here / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
