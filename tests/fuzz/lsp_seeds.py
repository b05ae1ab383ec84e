#!/usr/bin/env python3
"""Writes seed LSP sessions for the lsp fuzz target (scripts/fuzz.sh): one per given file,
opened, edited, diagnosed and asked for code actions, plus a few framing oddities."""
import json
import os
import sys


def frame(msg):
    body = json.dumps(msg).encode() if not isinstance(msg, bytes) else msg
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def session(i, name, text):
    root = "file:///nonexistent/shardlint-fuzz"
    uri = root + "/" + name
    caps = {"textDocument": {"diagnostic": {}}} if i % 2 else {}
    if i % 3 == 0:
        caps["general"] = {"positionEncodings": ["utf-8"]}
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"rootUri": root, "capabilities": caps}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen",
         "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange",
         "params": {"textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"range": {"start": {"line": 1, "character": 0},
                                                  "end": {"line": 1, "character": 3}}, "text": "# é\n"}]}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/diagnostic", "params": {"textDocument": {"uri": uri}}},
        {"jsonrpc": "2.0", "id": 3, "method": "textDocument/codeAction",
         "params": {"textDocument": {"uri": uri},
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                    "context": {"diagnostics": [{"code": "SL101", "source": "shardlint",
                                                 "range": {"start": {"line": 7, "character": 4},
                                                           "end": {"line": 7, "character": 13}}}]}}},
        {"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    return b"".join(frame(m) for m in msgs)


def main():
    out = sys.argv[1]
    files = sys.argv[2:][:80]
    for i, path in enumerate(files):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        with open(os.path.join(out, "session_%03d" % i), "wb") as f:
            f.write(session(i, os.path.basename(path), text))
    odd = {
        "no_length": b"Content-Type: x\r\n\r\n{}",
        "bad_json": frame(b"{\"jsonrpc\": \"2.0\", \"id\": 1,"),
        "batch": frame(b"[1, 2]"),
        "lowercase_header": b"content-length: 2\n\n{}",
        "two_lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "before_init": frame({"jsonrpc": "2.0", "id": 1, "method": "textDocument/diagnostic", "params": {}}),
    }
    for name, data in odd.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
