#!/usr/bin/env python3
"""Starts `SHARDLINT server`, sends `initialize` (LSP over stdio, Content-Length framing), and prints the
server's `serverInfo` as JSON; then `shutdown` and `exit`. Exit 1 when no answer comes within 30 s.
Standard library only: it runs in the clean Debian root (tests/install/clean_root.sh).

    lsp_initialize.py SHARDLINT [ROOT_FOLDER]
"""
import json
import os
import subprocess
import sys
import threading


def send(proc, msg):
    body = json.dumps(msg).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def read(stream):
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return json.loads(stream.read(length)) if length is not None else None


def main():
    exe = sys.argv[1]
    folder = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".")
    proc = subprocess.Popen([exe, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    timer = threading.Timer(30, proc.kill)
    timer.start()
    try:
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"processId": os.getpid(), "rootUri": "file://" + folder, "capabilities": {}}})
        while True:
            msg = read(proc.stdout)
            if msg is None:
                print("no answer to initialize", file=sys.stderr)
                return 1
            if msg.get("id") == 1:
                break
        result = msg.get("result") or {}
        send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        send(proc, {"jsonrpc": "2.0", "method": "exit"})
        print(json.dumps({"serverInfo": result.get("serverInfo"),
                          "textDocumentSync": (result.get("capabilities") or {}).get("textDocumentSync") is not None}))
        proc.wait(timeout=30)
        return 0
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()


if __name__ == "__main__":
    sys.exit(main())
