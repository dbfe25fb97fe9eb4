#!/usr/bin/env python3
"""Prints Rust `CommandSpec` literals for the named commands, read from a running
redis-server's COMMAND INFO / COMMAND DOCS, as a starting point for a family's table.

usage: scripts/gen_specs.py [--port 6399] get set config ...
The handler is named after the command (`config|get` -> `config_get`); edit as needed.
"""
import socket
import sys


class Resp:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t in (b"+",):
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            d = self.f.read(n + 2)[:-2]
            return d.decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected %r" % line)


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spec(info, docs, indent):
    name, arity, flags, first, last, step, acl = info[:7]
    subs = info[9] if len(info) > 9 else []
    d = dict(zip(docs[::2], docs[1::2])) if docs else {}
    pad = " " * indent
    keys = "KeySpec::None" if first == 0 else f"KeySpec::Range({first}, {last}, {step})"
    fl = ", ".join(rust_str(f) for f in flags if f != "movablekeys")
    ac = ", ".join(rust_str(a.lstrip("@")) for a in acl)
    handler = name.replace("|", "_").replace("-", "_")
    out = [f"{pad}CommandSpec {{"]
    out.append(f"{pad}    name: {rust_str(name)},")
    out.append(f"{pad}    arity: {arity},")
    out.append(f"{pad}    flags: &[{fl}],")
    out.append(f"{pad}    keys: {keys},")
    out.append(f"{pad}    acl: &[{ac}],")
    out.append(f"{pad}    group: {rust_str(d.get('group', 'generic'))},")
    out.append(f"{pad}    since: {rust_str(d.get('since', '1.0.0'))},")
    out.append(f"{pad}    summary: {rust_str(d.get('summary', ''))},")
    out.append(f"{pad}    complexity: {rust_str(d.get('complexity', '') or '')},")
    if subs:
        sub_docs = d.get("subcommands") or []
        sd = dict(zip(sub_docs[::2], sub_docs[1::2]))
        out.append(f"{pad}    subcommands: &[")
        for s in subs:
            out.append(spec(s, sd.get(s[0]), indent + 8) + ",")
        out.append(f"{pad}    ],")
        out.append(f"{pad}    handler: {handler},")
    else:
        out.append(f"{pad}    handler: {handler},")
    if "movablekeys" in flags:
        out.append(f"{pad}    // movablekeys: replace keys with KeySpec::Custom")
    out.append(f"{pad}    ..CommandSpec::DEFAULT")
    out.append(f"{pad}}}")
    return "\n".join(out)


def main():
    argv = sys.argv[1:]
    port = 6399
    if argv[:1] == ["--port"]:
        port = int(argv[1])
        argv = argv[2:]
    r = Resp(port)
    for name in argv:
        info = r.call("COMMAND", "INFO", name)[0]
        if info is None:
            print(f"// {name}: unknown to this redis-server", file=sys.stderr)
            continue
        docs = r.call("COMMAND", "DOCS", name)
        d = docs[1] if docs else None
        print(spec(info, d, 4) + ",")


if __name__ == "__main__":
    main()
