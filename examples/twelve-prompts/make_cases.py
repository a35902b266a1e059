#!/usr/bin/env python3
"""Writes cases.jsonl: 900 invoice lines to total, seeded, so the file is the same each time."""
import json
import random

rng = random.Random(20261205)
ITEMS = ["pens", "desk lamps", "reams of paper", "chairs", "monitors", "cables", "mugs", "notebooks"]
with open("cases.jsonl", "w") as out:
    for i in range(900):
        qty, price = rng.randint(2, 40), rng.randint(3, 250)
        item = rng.choice(ITEMS)
        out.write(json.dumps({
            "id": f"line-{i:03d}",
            "vars": {"line": f"{qty} {item} at {price} each: total {qty} × {price}"},
            "expected": str(qty * price),
        }) + "\n")
