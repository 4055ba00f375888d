#!/usr/bin/env python3
"""Size limits the style guide sets for src/ (run by scripts/test.sh):
no file over 600 lines, no function over 80 lines, and no class whose member functions are
defined in more than one .cc file (a limit is met along a seam, not by spreading a class).

A function is a "{" whose preceding code (since the last ; { or }) ends a parameter list, at
namespace or class scope, up to its matching closing brace; lambdas count toward the function they
are written in. Comments and string literals are skipped when braces are counted.

Usage: check_sizes.py [SRC_DIR]   (default: the repository's src/)
"""
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

def strip(line, state):
    """The line without comments and literals; state carries a block comment across lines."""
    out = []
    i = 0
    while i < len(line):
        if state["block"]:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            state["block"] = False
            i = end + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        if c == "'" and i > 0 and line[i - 1].isdigit() and line[max(0, i - 2):i] != "u8":
            out.append(c)  # a digit separator (1'000'000), not a character literal
            i += 1
            continue
        if c in "\"'":
            if c == '"' and i > 0 and line[i - 1] == "R":  # raw strings: skip to the delimiter
                m = re.match(r'"([^(]*)\(', line[i:])
                if m:
                    end = line.find(")" + m.group(1) + '"', i)
                    i = len(line) if end < 0 else end + len(m.group(1)) + 2
                    continue
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def kind_of(text):
    """What a "{" opens, from the code before it since the last ; { or }."""
    text = text.strip()
    if re.search(r"\bnamespace\b", text):
        return "namespace"
    if re.search(r"\b(class|struct|union|enum)\b[^()]*$", text):
        return "type"
    if re.search(r"(=|return|\(|,|\[)\s*$", text) or re.match(r"^(else|do|try)\b", text):
        return "block"
    if re.search(r"^(if|for|while|switch|catch)\b", text):
        return "block"
    # A parameter list's ")" then qualifiers, annotations, an initializer list or a trailing
    # return type.
    if re.search(r"\)", text) and not re.search(r"^[\w:<>]+\s*$", text):
        return "function"
    return "block"


def functions(path):
    """(first line number, length) of each function defined in `path`: namespace-scope
    definitions and member functions defined in a class body."""
    state = {"block": False}
    scopes = []  # per open brace: "function", "type", "namespace" or "block"
    start = None
    pending = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    for n, raw in enumerate(lines, 1):
        code = strip(raw, state)
        in_function = "function" in scopes
        for ch in code:
            if in_function:
                if ch == "{":
                    scopes.append("block")
                elif ch == "}":
                    kind = scopes.pop()
                    if kind == "function":
                        yield start, n - start + 1
                        in_function = False
                        pending = []
                continue
            if ch == "{":
                kind = kind_of("".join(pending))
                scopes.append(kind)
                if kind == "function":
                    start = n
                    in_function = True
                pending = []
            elif ch == "}":
                if scopes:
                    scopes.pop()
                pending = []
            elif ch == ";":
                pending = []
            else:
                pending.append(ch)
        pending.append(" ")


# An out-of-line member definition at namespace scope: "... Class::member(" on a line that
# starts in column 0.
MEMBER_DEFINITION = re.compile(r"\b([A-Z]\w*)::~?[A-Za-z_]\w*\s*\(")


def classes_defined(path):
    """The classes whose member functions `path` defines."""
    found = set()
    state = {"block": False}
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            code = strip(raw.rstrip("\n"), state)
            if not code or code[0] in " \t#}":
                continue
            found.update(m.group(1) for m in MEMBER_DEFINITION.finditer(code))
    return found


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    failures = []
    files_of = {}  # class -> the .cc files defining its members
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            with open(path, encoding="utf-8", errors="replace") as f:
                count = sum(1 for _ in f)
            if count > MAX_FILE_LINES:
                failures.append(f"src/{rel}: {count} lines (at most {MAX_FILE_LINES})")
            if name.endswith(".cc"):
                for cls in classes_defined(path):
                    files_of.setdefault(cls, []).append(f"src/{rel}")
            for first, length in functions(path):
                if length > MAX_FUNCTION_LINES:
                    failures.append(f"src/{rel}:{first}: a function of {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    for cls, where in sorted(files_of.items()):
        if len(where) > 1:
            failures.append(f"class {cls}: members defined in {len(where)} files ({', '.join(where)})")
    for f in failures:
        print(f)
    if failures:
        print(f"sizes: {len(failures)} over the limits; split them along their seams")
        return 1
    print("sizes: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
