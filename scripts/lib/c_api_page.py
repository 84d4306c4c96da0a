#!/usr/bin/env python3
"""The C API reference page, from include/zklock.h's comments (cbindgen copies the Rust doc
comments there): the header's opening comment, then one section per documented declaration
(functions, types, constants), with an index.

  c_api_page.py include/zklock.h OUT.html
"""
import html
import re
import sys


def main(header: str, out: str) -> None:
    text = open(header).read()
    intro = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    intro_text = "\n".join(l.strip()[2:] if l.strip().startswith("* ") else l.strip().lstrip("*")
                           for l in (intro.group(1) if intro else "").splitlines()).strip()
    entries = []
    for m in re.finditer(r"/\*\*(.*?)\*/\s*\n(.*?)(?=\n\s*\n|/\*\*)", text, re.S):
        doc = "\n".join(re.sub(r"^\s*\*( |$)", "", l) for l in m.group(1).splitlines()).strip()
        decl = m.group(2).strip()
        name = None
        for pattern in (r"\b(zkl_\w+)\s*\(", r"}\s*(zkl_\w+)\s*;", r"#define\s+(ZKL_\w+)", r"\b(ZKL_\w+)\b",
                        r"typedef\s+[^;]*?\(\*\s*(zkl_\w+)\)", r"typedef\s+\w+\s+(zkl_\w+)\s*;", r"\b(zkl_\w+)\b"):
            n = re.search(pattern, decl)
            if n:
                name = n.group(1)
                break
        if name is None:
            # A struct field or enum variant: documented in its type's declaration.
            continue
        # A struct or enum declaration carries its fields' comments: show the whole of it.
        if decl.startswith("typedef struct") or decl.startswith("typedef enum") or decl.startswith("enum"):
            end = text.find("}", m.end(2) - len(m.group(2)))
            decl = text[m.start(2):text.find(";", end) + 1].strip()
        entries.append((name, doc, decl))
    seen, unique = set(), []
    for e in entries:
        if e[0] not in seen:
            seen.add(e[0])
            unique.append(e)
    functions = [e for e in unique if re.search(r"\b" + e[0] + r"\s*\(", e[2])]
    others = [e for e in unique if e not in functions]
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>zklock.h: the C API</title>",
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
        "pre{background:#f4f4f4;padding:.6rem;overflow-x:auto}code{font-size:.95em}h2{border-bottom:1px solid #ccc}"
        "nav ul{columns:3}</style></head><body>",
        "<p><a href=\"../index.html\">&larr; the zklock book</a></p>",
        "<h1><code>zklock.h</code>: the C API</h1>",
        f"<pre>{html.escape(intro_text)}</pre>",
        "<nav><h2 id=\"index\">Index</h2><h3>Functions</h3><ul>",
        *[f"<li><a href=\"#{n}\"><code>{n}</code></a></li>" for n, _, _ in functions],
        "</ul><h3>Types and constants</h3><ul>",
        *[f"<li><a href=\"#{n}\"><code>{n}</code></a></li>" for n, _, _ in others],
        "</ul></nav>",
        "<h2 id=\"functions\">Functions</h2>",
    ]
    for section, items in (("functions", functions), ("types", others)):
        if section == "types":
            parts.append("<h2 id=\"types\">Types and constants</h2>")
        for name, doc, decl in items:
            parts += [f"<h3 id=\"{name}\"><code>{name}</code></h3>",
                      f"<pre><code>{html.escape(decl)}</code></pre>",
                      "".join(f"<p>{html.escape(p)}</p>" for p in doc.split("\n\n"))]
    parts.append("</body></html>")
    open(out, "w").write("\n".join(parts))
    print(f"c_api_page.py: {len(functions)} functions, {len(others)} types and constants")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
