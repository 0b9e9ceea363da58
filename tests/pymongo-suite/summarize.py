"""Summarizes a pytest junit XML: counts, then failures and errors grouped into categories.

    python summarize.py junit.xml

A category is the exception type plus the first line of its message with numbers, hex ids,
ObjectIds and quoted values normalised, so that one root cause appears once with its count and
a few example tests. Also lists the test modules with the most failures.
"""

from __future__ import annotations

import collections
import re
import sys
import xml.etree.ElementTree as ET


def normalise(text: str) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    first = re.sub(r"ObjectId\('[0-9a-f]{24}'\)", "ObjectId(...)", first)
    first = re.sub(r"0x[0-9a-f]+", "0x...", first)
    first = re.sub(r"\b\d+(\.\d+)?\b", "N", first)
    first = re.sub(r"'[^']{40,}'", "'...'", first)
    return first[:220]


def main(path: str) -> None:
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    counts = collections.Counter()
    categories: dict[str, list[str]] = collections.defaultdict(list)
    modules = collections.Counter()
    skips = collections.Counter()
    for case in cases:
        name = f"{case.get('classname')}.{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "errors"
                kind = (child.get("type") or child.tag).split(".")[-1]
                msg = normalise(child.get("message") or child.text or "")
                categories[f"{kind}: {msg}"].append(name)
                modules[(case.get("classname") or "").rsplit(".", 1)[0]] += 1
                break
            if child.tag == "skipped":
                outcome = "skipped"
                skips[normalise(child.get("message") or "")] += 1
                break
        counts[outcome] += 1
    total = sum(counts.values())
    print(
        f"pymongo suite: {total} tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['errors']} errors, {counts['skipped']} skipped"
    )
    print("\nfailure categories (count, cause, examples):")
    for cat, names in sorted(categories.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(names):5d}  {cat}")
        for n in names[:3]:
            print(f"         e.g. {n}")
    print("\nmodules with the most failures:")
    for mod, n in modules.most_common(25):
        print(f"{n:5d}  {mod}")
    print("\nmost common skip reasons:")
    for reason, n in skips.most_common(15):
        print(f"{n:5d}  {reason}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
