#!/usr/bin/python3
"""Checks Debian packages against the package table of docs/install.md.

    check_package_docs.py DOC PACKAGE=FILE.deb...

For each package, the paths the table's "files" column names (with `*`, `{a,b}`
and `<libdir>`; a path names a directory and what is below it too) must each match
something in the package, and every file in the package must match one of them.
Prints what differs and exits 1 when anything does.
"""
import re
import subprocess
import sys


def pattern_regex(path):
    out, i = "", 0
    while i < len(path):
        if path.startswith("<libdir>", i):
            out, i = out + r"lib(/[a-z0-9_-]+)?", i + len("<libdir>")
        elif path[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif path[i] == "{":
            end = path.index("}", i)
            out += "(" + "|".join(re.escape(a) for a in path[i + 1:end].split(",")) + ")"
            i = end + 1
        else:
            out, i = out + re.escape(path[i]), i + 1
    return re.compile(out.rstrip("/") + "(/.*)?$")


def package_entries(deb):
    listing = subprocess.run(["dpkg-deb", "--contents", deb], check=True, capture_output=True, text=True).stdout
    entries = []
    for line in listing.splitlines():
        fields = line.split(None, 5)
        path = fields[5].split(" -> ")[0][1:].rstrip("/") or "/"
        entries.append((path, fields[0].startswith("d")))
    return entries


def main():
    doc = open(sys.argv[1], encoding="utf-8").read()
    problems = []
    for arg in sys.argv[2:]:
        package, deb = arg.split("=", 1)
        rows = [l for l in doc.splitlines() if l.startswith(f"| `{package}` |")]
        if not rows:
            problems.append(f"{package}: no row in the package table")
            continue
        named = re.findall(r"`(/[^`]*)`", rows[0].split("|")[2])
        regexes = [(p, pattern_regex(p)) for p in named]
        entries = package_entries(deb)
        for p, r in regexes:
            if not any(r.match(path) for path, _ in entries):
                problems.append(f"{package}: the docs name {p}, the package has nothing there")
        for path, is_dir in entries:
            if not is_dir and not any(r.match(path) for _, r in regexes):
                problems.append(f"{package}: has {path}, which the docs do not list")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
