#!/usr/bin/env python3
"""No source file imports a file that imports it back, in any crate.

Every `.rs` file under each crate's `src/` is a node. A file depends on
another when one of its paths (a `use` tree, or a `crate::`/`super::`/`self::`
path or a child module's path in code) names an item of the other file's
module: the path is followed as deep as it names module files, so
`crate::catalog::model::Catalog` is an edge to `catalog/model.rs`, and
`super::Catalog` from `catalog/topics.rs` an edge to `catalog/mod.rs`.
Declaring a module (`mod x;`) is not a dependency; a file's own inline test
modules are the file.

Exit 1, listing each circle (a strongly connected set of files, with one
cycle through it), when any exists; 0 otherwise.

    python3 scripts/module_circles.py [CRATE_DIR ...]   # default: every workspace member
    python3 scripts/module_circles.py --self-test       # plants circles, must find them
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def strip(src):
    """The source with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
            continue
        m = re.match(r'b?r(#*)"', src[i : i + 80]) if c in "br" else None
        if m and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(' ""' + "\n" * src.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i : i + 12])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e as f}, self}` -> [[a,b], [a,c,d], [a,c,e], [a]]."""
    tree = re.sub(r"\s+", "", tree)
    paths = []

    def walk(prefix, s):
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if "{" in p:
                head, rest = p.split("{", 1)
                segs = [x for x in head.split("::") if x]
                walk(prefix + segs, rest[: rest.rfind("}")])
            else:
                p = re.sub(r"as\w+$", "", p) if "as" in p and re.search(r"\Was\w+$", "x" + p) else p
                p = p.split(" as ")[0]
                segs = [x for x in p.split("::") if x]
                segs = [x for x in segs if x != "self"] if segs and segs[-1] == "self" else segs
                if segs and segs[-1] == "*":
                    segs = segs[:-1]
                paths.append(prefix + segs)

    walk([], tree)
    return paths


class Crate:
    def __init__(self, src_dir, root_file):
        self.src = src_dir
        self.files = {}  # module path tuple -> file
        self.children = {}  # module path tuple -> set of child names (file modules)
        self._collect(root_file, ())
        self.imports = {}  # module path -> {name: (module path it was used from, path)}
        for modpath, f in self.files.items():
            text = strip(open(f, encoding="utf-8").read())
            text = re.sub(r"\bmod\s+\w+\s*\{", lambda m: m.group(0), text)
            top = self._top_level(text)
            names = self.imports.setdefault(modpath, {})
            for m in re.finditer(r"\buse\s+([^;]+);", top):
                for segs in expand_use(m.group(1)):
                    alias = re.search(r"\sas\s+(\w+)\s*$", m.group(1))
                    if segs and segs[-1] != "*":
                        names[segs[-1]] = (modpath, segs)

    def _collect(self, path, modpath):
        self.files[modpath] = path
        self.children.setdefault(modpath, set())
        text = strip(open(path, encoding="utf-8").read())
        base = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        if stem not in ("mod", "lib", "main") and modpath:
            base = os.path.join(base, stem)
        if modpath == () and stem != "lib" and stem != "main":
            base = os.path.dirname(path)
        pending_path = None
        for m in re.finditer(r'#\[path\s*=\s*""\]|(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
            if m.group(1) is None:
                pending_path = True
                continue
            name = m.group(1)
            if pending_path:
                pending_path = None  # a #[path] module: read its target from the raw text
                raw = open(path, encoding="utf-8").read()
                pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+' + name + r"\s*;", raw)
                cands = [os.path.normpath(os.path.join(os.path.dirname(path), pm.group(1)))] if pm else []
            else:
                cands = [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            for c in cands:
                if os.path.exists(c):
                    self.children[modpath].add(name)
                    self._collect(c, modpath + (name,))
                    break

    @staticmethod
    def _top_level(text):
        """The text outside inline `mod x { ... }` blocks."""
        out, i = [], 0
        for m in re.finditer(r"\bmod\s+\w+\s*\{", text):
            if m.start() < i:
                continue
            depth, j = 1, m.end()
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            out.append(text[i : m.start()])
            i = j
        out.append(text[i:])
        return "".join(out)

    def resolve(self, modpath, segs, depth=0):
        """The file a path names from inside module `modpath` (file modules only), or None."""
        if not segs:
            return None
        cur = list(modpath)
        first = segs[0]
        if first == "crate":
            cur, rest = [], segs[1:]
        elif first == "super" or first == "self":
            rest = list(segs)
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    if not cur:
                        return None
                    cur.pop()
                rest = rest[1:]
        else:
            # a relative path: a child module of this one, else an external crate or a local name
            while tuple(cur) not in self.files:
                cur.pop()
            if first not in self.children.get(tuple(cur), ()):
                return None
            rest = list(segs)
        while tuple(cur) not in self.files and cur:
            cur.pop()
        for i, s in enumerate(rest):
            if s in self.children.get(tuple(cur), ()):
                cur.append(s)
                continue
            # a name the module imports (a re-export, or an ancestor's `use`
            # a child reaches through `super::`): the dependency is on the
            # file the name comes from
            via = self.imports.get(tuple(cur), {}).get(s)
            if via is not None and depth < 8:
                return self.resolve(via[0], via[1] + rest[i + 1 :], depth + 1) or self.files.get(tuple(cur))
            break
        return self.files.get(tuple(cur))

    def edges(self):
        out = {}
        self.why = {}
        file_mod = {f: m for m, f in self.files.items()}
        for f, modpath in file_mod.items():
            text = strip(open(f, encoding="utf-8").read())
            deps = out.setdefault(f, set())
            # inline module scopes: (start, end, path tuple)
            scopes = []
            for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
                depth, j = 1, m.end()
                while j < len(text) and depth:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    j += 1
                scopes.append((m.start(), j, m.group(1)))

            def scope_of(pos):
                inner = [s for s in scopes if s[0] <= pos < s[1]]
                inner.sort()
                return modpath + tuple(s[2] for s in inner)

            def add(pos, segs):
                here = scope_of(pos)
                # paths from an inline module: `super` climbs inline scopes first
                inline_depth = len(here) - len(modpath)
                s = list(segs)
                while inline_depth and s and s[0] == "super":
                    s, inline_depth = s[1:], inline_depth - 1
                    if not s:
                        return
                if inline_depth and s and s[0] not in ("crate", "super", "self"):
                    if s[0] not in self.children.get(modpath, ()):
                        return
                if inline_depth and s and s[0] == "self":
                    return
                target = self.resolve(modpath, s if s else ["self"])
                if target and target != f:
                    deps.add(target)
                    self.why.setdefault((f, target), "::".join(segs))

            used = []
            for m in re.finditer(r"\buse\s+([^;]+);", text):
                used.append((m.start(), m.end()))
                for p in expand_use(m.group(1)):
                    add(m.start(), p)
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self|[a-z_]\w*)(?:::\w+)+)", text):
                if any(a <= m.start() < b for a, b in used):
                    continue
                add(m.start(), m.group(1).split("::"))
        return out


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in list(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def a_cycle(graph, comp):
    comp = set(comp)
    start = sorted(comp)[0]
    # BFS back to start inside the component
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in comp and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def roots(crate_dir):
    src = os.path.join(crate_dir, "src")
    out = [os.path.join(src, r) for r in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, r))]
    bins = os.path.join(src, "bin")
    if os.path.isdir(bins):
        for e in sorted(os.listdir(bins)):
            p = os.path.join(bins, e)
            if e.endswith(".rs"):
                out.append(p)
            elif os.path.exists(os.path.join(p, "main.rs")):
                out.append(os.path.join(p, "main.rs"))
    return out


def members():
    text = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read()
    m = re.search(r"members\s*=\s*\[([^\]]*)\]", text)
    return [os.path.join(ROOT, x) for x in re.findall(r'"([^"]+)"', m.group(1))]


def main(argv):
    dirs = [os.path.abspath(a) for a in argv] or members()
    found = 0
    for d in dirs:
        for r in roots(d):
            crate = Crate(os.path.dirname(r) if not r.endswith(("lib.rs",)) else os.path.dirname(r), r)
            graph = crate.edges()
            for comp in sccs(graph):
                found += 1
                cyc = [os.path.relpath(p, ROOT) for p in a_cycle(graph, comp)]
                print(f"circle ({len(comp)} files): " + " -> ".join(cyc))
                full = a_cycle(graph, comp)
                for a, b in zip(full, full[1:]):
                    print(f"  {os.path.relpath(a, ROOT)} uses {crate.why[(a, b)]}")
                others = sorted(set(os.path.relpath(p, ROOT) for p in comp) - set(cyc))
                if others:
                    print("  also in it: " + ", ".join(others))
    if found:
        print(f"{found} circle(s) between source files; break each by moving what both need to a file both import")
        return 1
    print("no circles between source files")
    return 0


def self_test():
    """Plants the circles this script is for in a scratch crate and checks
    each is found, and that the same crate without them passes."""
    import contextlib
    import io
    import tempfile

    def run(files):
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                path = os.path.join(d, "src", rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main([d])
            return code, out.getvalue()

    clean = {
        "lib.rs": "mod a;\nmod b;\nmod g;\npub use a::A;\n",
        "a.rs": "use crate::b::B;\npub struct A(B);\n",
        "b.rs": "// use crate::a::A;\npub struct B;\nconst S: &str = \"crate::a::A\";\n",
        "g/mod.rs": "mod kind;\nmod glue;\nuse kind::Kind;\npub struct G(Kind);\n",
        "g/kind.rs": "pub struct Kind;\n",
        "g/glue.rs": "use super::G;\nimpl G { fn f(&self) {} }\n",
    }
    planted = {
        "sibling files": dict(clean, **{"b.rs": "use crate::a::A;\npub struct B;\nfn f(_: &A) {}\n"}),
        "a child and its mod.rs": dict(clean, **{"g/kind.rs": "pub struct Kind;\nfn f(_: &super::G) {}\n"}),
        "a path in code": dict(clean, **{"b.rs": "pub struct B;\nfn f() { let _ = crate::a::A::default; }\n"}),
        "a test module": dict(clean, **{"b.rs": "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"}),
    }
    failed = 0
    code, out = run(clean)
    if code != 0:
        print("self-test: the clean crate was refused:\n" + out)
        failed += 1
    for name, files in planted.items():
        code, out = run(files)
        if code != 1 or "circle (" not in out:
            print(f"self-test: a circle through {name} was not found:\n{out}")
            failed += 1
    print(f"self-test: {len(planted)} planted circles, {failed} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(main(sys.argv[1:]))
