#!/usr/bin/env python3
"""Prints omitempty.tsv: the proto fields whose zero value JSON leaves out.

    omitempty.py PROTO_DIR API_DIR APIMACHINERY_DIR APIEXTENSIONS_DIR > omitempty.tsv

PROTO_DIR is apiserver/proto; the other three are checkouts of the Go modules
k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver at the
tag the protos came from (README.md says which).

Go's generated protobuf code writes every field that is not a pointer, zeros
included (`nodePort: 0`, `imagePullPolicy: ""`), so the wire cannot tell an
unset field from a zero one. kube-apiserver decodes into the Go structs and
writes JSON with `encoding/json`, which leaves a zero out only where the
field's json tag says `omitempty`. A zero on a pointer field (`replicas`,
`automountServiceAccountToken`) is a value, and a zero on a value field
without `omitempty` (`containerPort`, `port`) is written; only the fields
printed here lose their zero.

A row is a field whose Go type is a scalar that is not a pointer (string,
bool, an integer or float, or a named type of one, as `PullPolicy` or
`types.UID`) and whose json tag has `omitempty`, named by its proto message
(the Go struct's name in its package's proto package) and proto field (the
`name=` of its protobuf tag). Fails on anything it cannot classify or find
in the protos, so a refresh cannot silently change the JSON.
"""
import pathlib
import re
import sys

# Go module → (directory argument index, proto package prefix).
MODULES = {
    "k8s.io/api": (2, "api"),
    "k8s.io/apimachinery": (3, "apimachinery"),
    "k8s.io/apiextensions-apiserver": (4, "apiextensions_apiserver"),
}

SCALARS = {
    "string", "bool", "byte", "rune",
    "int", "int8", "int16", "int32", "int64",
    "uint", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64",
}

TYPE = re.compile(r"^(?:type\s+)?(\w+)\s+(=\s*)?(\S.*?)\s*(?://.*)?$")
FIELD = re.compile(r"^\s+(\w+)\s+([^`]+?)\s+`([^`]*)`")
EMBEDDED = re.compile(r"^\s+(\*?[\w.]+)\s+`([^`]*)`")
IMPORT = re.compile(r'^\s*(?:import\s+)?(\w+\s+)?"([^"]+)"')


def proto_messages(proto_dir):
    """Every proto message's full name → its field names."""
    messages = {}
    for path in sorted(pathlib.Path(proto_dir).rglob("generated.proto")):
        package, current = None, None
        for line in path.read_text().splitlines():
            if match := re.match(r"package (\S+);", line):
                package = match.group(1)
            elif match := re.match(r"message (\w+) \{", line):
                current = f"{package}.{match.group(1)}"
                messages[current] = set()
            elif current and (
                match := re.match(r"  (?:optional |repeated )?(?:map<[^>]+>|\S+) (\w+) = \d+;", line)
            ):
                messages[current].add(match.group(1))
            elif line.startswith("}"):
                current = None
    return messages


class Package:
    """One Go package's type declarations, read from its non-test files."""

    def __init__(self, import_path, directory):
        self.import_path = import_path
        self.named = {}  # type name → (underlying type text, imports of its file)
        self.structs = {}  # struct name → [(field, type text, tag, imports)]
        for path in sorted(directory.glob("*.go")):
            if path.name.endswith("_test.go"):
                continue
            self.read(path)

    def read(self, path):
        lines = path.read_text().splitlines()
        imports, in_imports, in_types = {}, False, False
        struct, depth = None, 0
        for line in lines:
            stripped = line.strip()
            if struct is not None:
                if stripped.startswith("//") or not stripped:
                    continue
                if stripped == "}" and depth == 0:
                    struct = None
                    continue
                if "struct {" in stripped or "interface {" in stripped:
                    if "`" in stripped:
                        sys.exit(f"omitempty.py: {path}: anonymous struct field: {line}")
                    depth += 1
                    continue
                if stripped == "}":
                    depth -= 1
                    continue
                if depth:
                    continue
                if match := FIELD.match(line):
                    name, kind, tag = match.groups()
                    if "," in name or "," in kind.split("[")[0] and "map[" not in kind:
                        sys.exit(f"omitempty.py: {path}: cannot read field: {line}")
                    self.structs[struct].append((name, kind.strip(), tag, imports))
                elif match := EMBEDDED.match(line):
                    kind, tag = match.groups()
                    self.structs[struct].append((kind, kind, tag, imports))
                elif "`" in line:
                    sys.exit(f"omitempty.py: {path}: cannot read field: {line}")
                continue
            if in_imports:
                if stripped == ")":
                    in_imports = False
                elif match := IMPORT.match(line):
                    alias, target = match.groups()
                    imports[(alias or target.rsplit("/", 1)[-1]).strip()] = target
                continue
            if stripped.startswith("import ("):
                in_imports = True
                continue
            if stripped.startswith("import ") and (match := IMPORT.match(stripped)):
                alias, target = match.groups()
                imports[(alias or target.rsplit("/", 1)[-1]).strip()] = target
                continue
            if match := re.match(r"^type (\w+) struct \{$", line):
                struct, depth = match.group(1), 0
                self.structs[struct] = []
                continue
            if line.startswith("type ("):
                in_types = True
                continue
            if in_types:
                if line.startswith(")"):
                    in_types = False
                elif line.startswith("\t") and not stripped.startswith("//") and stripped:
                    if match := TYPE.match(stripped):
                        self.named[match.group(1)] = (match.group(3), imports)
                continue
            if line.startswith("type ") and (match := TYPE.match(line)):
                if not match.group(3).endswith("{"):
                    self.named[match.group(1)] = (match.group(3), imports)
            elif line.startswith("type ") and re.match(r"^type \w+ (interface|func)", line):
                pass


class Universe:
    """The Go packages read, by import path, loaded as they are named."""

    def __init__(self, roots):
        self.roots = roots
        self.packages = {}

    def package(self, import_path):
        if import_path not in self.packages:
            for module, root in self.roots.items():
                if import_path == module or import_path.startswith(module + "/"):
                    directory = root / import_path[len(module):].lstrip("/")
                    if not directory.is_dir():
                        sys.exit(f"omitempty.py: no Go package {import_path} in {root}")
                    self.packages[import_path] = Package(import_path, directory)
                    break
            else:
                return None
        return self.packages[import_path]

    def is_scalar(self, kind, package, imports, where):
        """Whether a Go type is a non-pointer scalar; exits when it cannot tell."""
        kind = kind.strip()
        if kind in SCALARS:
            return True
        if kind.startswith(("*", "[", "map[", "func", "chan", "interface")):
            return False
        if "." in kind:
            alias, name = kind.split(".", 1)
            target = imports.get(alias)
            if target is None:
                sys.exit(f"omitempty.py: {where}: unknown package {alias} of {kind}")
            other = self.package(target)
            if other is None:
                # Outside the three modules: only types known to be structs.
                if (target, name) in FOREIGN_STRUCTS:
                    return False
                sys.exit(f"omitempty.py: {where}: cannot classify {kind} ({target})")
            return self.is_scalar(name, other, {}, where)
        if kind in package.structs:
            return False
        if kind in package.named:
            underlying, file_imports = package.named[kind]
            return self.is_scalar(underlying, package, file_imports, where)
        sys.exit(f"omitempty.py: {where}: cannot classify {kind} in {package.import_path}")


# Struct types from other modules that API structs embed; never scalars.
FOREIGN_STRUCTS = set()


def proto_package(import_path):
    for module, (_, prefix) in MODULES.items():
        if import_path.startswith(module + "/"):
            rest = import_path[len(module) + 1:]
            return prefix + "." + rest.replace("/", ".")
    return None


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    proto_dir = pathlib.Path(sys.argv[1])
    roots = {module: pathlib.Path(sys.argv[index]) for module, (index, _) in MODULES.items()}
    messages = proto_messages(proto_dir)
    universe = Universe(roots)
    # Each proto file's Go package: its directory under PROTO_DIR, with
    # k8s-pb's `api/` standing for the module k8s.io/api.
    go_packages = []
    for path in sorted(proto_dir.rglob("generated.proto")):
        relative = path.parent.relative_to(proto_dir).as_posix()
        module, _, rest = relative.partition("/")
        go_packages.append(f"k8s.io/{module}/{rest}")
    rows, problems = [], []
    for import_path in go_packages:
        package = universe.package(import_path)
        prefix = proto_package(import_path)
        for struct, fields in sorted(package.structs.items()):
            message = f"{prefix}.{struct}"
            for name, kind, tag, imports in fields:
                json_tag = re.search(r'json:"([^"]*)"', tag)
                proto_tag = re.search(r'protobuf:"[^"]*name=(\w+)', tag)
                if not json_tag or not proto_tag:
                    continue
                options = json_tag.group(1).split(",")[1:]
                if "omitempty" not in options:
                    continue
                where = f"{import_path}.{struct}.{name}"
                if not universe.is_scalar(kind, package, imports, where):
                    continue
                field = proto_tag.group(1)
                if message not in messages:
                    problems.append(f"{where}: no proto message {message}")
                elif field not in messages[message]:
                    problems.append(f"{where}: no proto field {message}.{field}")
                else:
                    rows.append(f"{message}\t{field}")
    if problems:
        sys.exit("omitempty.py: cannot map:\n  " + "\n  ".join(problems))
    print("# Generated by omitempty.py from the Go types of k8s.io/api, k8s.io/apimachinery")
    print("# and k8s.io/apiextensions-apiserver; do not edit.")
    print("# MESSAGE FIELD: a non-pointer scalar whose zero JSON leaves out (omitempty)")
    print("\n".join(sorted(set(rows))))


if __name__ == "__main__":
    main()
