#!/usr/bin/env python3
"""Every code block a reader sees is a tested example (scripts/test-docs runs the examples).

  doc_blocks.py check   fails, naming the block, if
      - a fenced block of README.md (or of a binding's README.md) is not preceded by a line `<!-- example: PATH[:ANCHOR] -->`
        whose text (the ANCHOR's lines, as mdBook's {{#include PATH:ANCHOR}} takes them,
        dedented) it equals;
      - a fenced block of docs/src/**/*.md is anything but one `{{#include PATH[:ANCHOR]}}` line of
        a file under examples/ (or a `text` block: output, a tree, a table);
      - a block is neither and is not preceded by `<!-- not run: WHY -->` (a shell block so marked
        must still parse: bash -n);
      - an example file (examples/{rust,c,python,node,shell}) is shown nowhere;
      - a link of README.md names a file of the repository that does not exist.
  doc_blocks.py sync    rewrites the READMEs' marked blocks from their files.
  doc_blocks.py stage SRC   resolves the example includes of a copy of docs/src (scripts/docs).
"""
import pathlib
import re
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(\s*)```([\w+-]*)\s*$")
MARK = re.compile(r"^<!-- example: (\S+?)(?::(\w+))? -->$")
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")
INCLUDE = re.compile(r"^\{\{#(?:include|rustdoc_include) (\S+?)(?::(\w+))?\}\}$")
EXAMPLE_DIRS = ["rust", "c", "python", "node", "shell"]
READMES = [ROOT / "README.md", ROOT / "bindings-python" / "README.md", ROOT / "bindings-node" / "README.md"]
NOT_SHOWN = {"test_examples.py", "tsconfig.json", "Cargo.toml", "lib.rs",
             "demo_worker.c", "demo_worker.py", "demo_worker.mjs"}  # lib.rs: a target; demo_worker: scripts/demo's


def anchored(path: pathlib.Path, anchor):
    """The text mdBook includes for PATH:ANCHOR (the whole file without ANCHOR lines if none)."""
    lines = path.read_text().splitlines()
    if anchor is None:
        out = [l for l in lines if not re.search(r"ANCHOR(_END)?:", l)]
    else:
        out, inside, found = [], False, False
        for l in lines:
            if re.search(r"ANCHOR:\s*" + re.escape(anchor) + r"\b", l):
                inside = found = True
            elif re.search(r"ANCHOR_END:\s*" + re.escape(anchor) + r"\b", l):
                inside = False
            elif inside and not re.search(r"ANCHOR(_END)?:", l):
                out.append(l)
        if not found:
            raise KeyError(f"{path.relative_to(ROOT)} has no ANCHOR: {anchor}")
    return textwrap.dedent("\n".join(out)).strip("\n")


def blocks(path: pathlib.Path):
    """(index of the opening fence line, language, body lines, preceding non-blank line)."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        yield i, j, m.group(2), lines[i + 1 : j], before
        i = j + 1


def parses(lang: str, body) -> str:
    """For a block shown but not run: a shell block must at least parse (bash -n); '' if it does."""
    if lang not in ("sh", "bash", "shell"):
        return ""
    done = subprocess.run(["bash", "-n"], input="\n".join(body) + "\n", text=True, capture_output=True)
    return done.stderr.strip() if done.returncode else ""


def check() -> int:
    errors, shown = [], set()
    for readme in READMES:
        rname = str(readme.relative_to(ROOT))
        for i, _, lang, body, before in blocks(readme):
            m = MARK.match(before)
            if m:
                path = ROOT / m.group(1)
                shown.add(path.resolve())
                try:
                    want = anchored(path, m.group(2))
                except (OSError, KeyError) as e:
                    errors.append(f"{rname}:{i + 1}: {e}")
                    continue
                if textwrap.dedent("\n".join(body)).strip("\n") != want:
                    errors.append(f"{rname}:{i + 1}: the block is not {m.group(1)}"
                                  f"{':' + m.group(2) if m.group(2) else ''} (scripts/lib/doc_blocks.py sync)")
            elif NOT_RUN.match(before):
                if parses(lang, body):
                    errors.append(f"{rname}:{i + 1}: the block does not parse: {parses(lang, body)}")
            elif lang != "text":
                errors.append(f"{rname}:{i + 1}: a ```{lang} block with no <!-- example: PATH --> line before it")
    # README.md's links into the repository (the book's pages among them) name files that exist.
    for target in re.findall(r"\]\(([^)#\s]+)", (ROOT / "README.md").read_text()):
        if not re.match(r"[a-z]+:", target) and not (ROOT / target).exists():
            errors.append(f"README.md: a link to {target}, which does not exist")
    for page in sorted((ROOT / "docs" / "src").rglob("*.md")):
        rel = page.relative_to(ROOT)
        for i, _, lang, body, before in blocks(page):
            text = [l.strip() for l in body if l.strip()]
            m = INCLUDE.match(text[0]) if len(text) == 1 else None
            if m:
                path = (page.parent / m.group(1)).resolve()
                if not path.is_relative_to(ROOT / "examples") and not NOT_RUN.match(before):
                    errors.append(f"{rel}:{i + 1}: includes {m.group(1)}, not an example file")
                elif not path.exists():
                    errors.append(f"{rel}:{i + 1}: includes {m.group(1)}, which does not exist")
                else:
                    shown.add(path)
                    try:
                        anchored(path, m.group(2))
                    except KeyError as e:
                        errors.append(f"{rel}:{i + 1}: {e}")
            elif NOT_RUN.match(before):
                if parses(lang, body):
                    errors.append(f"{rel}:{i + 1}: the block does not parse: {parses(lang, body)}")
            elif lang != "text":
                errors.append(f"{rel}:{i + 1}: a ```{lang} block written out: make it an example file and {{{{#include}}}} it")
    for d in EXAMPLE_DIRS:
        for f in sorted((ROOT / "examples" / d).iterdir()):
            if f.is_file() and f.name not in NOT_SHOWN and f.resolve() not in shown:
                errors.append(f"examples/{d}/{f.name} is shown on no page")
    for e in errors:
        print(e)
    print(f"{len(shown)} example files shown, {len(errors)} problems")
    return 1 if errors else 0


def sync() -> int:
    for readme in READMES:
        lines = readme.read_text().splitlines()
        for i, j, lang, body, before in reversed(list(blocks(readme))):
            m = MARK.match(before)
            if m:
                lines[i + 1 : j] = anchored(ROOT / m.group(1), m.group(2)).splitlines()
        readme.write_text("\n".join(lines) + "\n")
    return 0


def stage(src: str) -> int:
    """Resolves, in a copy of docs/src (SRC), every {{#include}} of an example inside a code block
    into the example's text, dedented (mdBook's own include keeps an anchor's indentation); the
    includes stay relative to the page in docs/src, which the copy mirrors."""
    staged = pathlib.Path(src)
    for page in staged.rglob("*.md"):
        rel = page.relative_to(staged)
        original = ROOT / "docs" / "src" / rel
        lines = page.read_text().splitlines()
        for i, j, lang, body, before in reversed(list(blocks(page))):
            text = [l.strip() for l in body if l.strip()]
            m = INCLUDE.match(text[0]) if len(text) == 1 else None
            if m and (original.parent / m.group(1)).resolve().is_relative_to(ROOT / "examples"):
                indent = len(body[0]) - len(body[0].lstrip()) if body else 0
                code = anchored((original.parent / m.group(1)).resolve(), m.group(2)).splitlines()
                lines[i + 1 : j] = [(" " * indent + l) if l else l for l in code]
        page.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "stage":
        sys.exit(stage(sys.argv[2]))
    sys.exit({"check": check, "sync": sync}[sys.argv[1]]())
