# requires: 3.8
# Continuation lines inside brackets indented less than their statement (upstream
# tree-sitter-python issue #256). CPython ignores indentation inside brackets; the grammar's scanner
# does not see brackets and emits a DEDENT there unless a closing bracket could follow. shardlint
# parses these through syntax::lineBreakView().
import os


def f(a, b, rows):
    if a:
        total = (a +
b)
        items = [x for
x in rows]
        path = os.path.join(a.
name, b)
        with_comment = (a +  # a comment ending a dedented line
  b)
        blank_lines = (a *

  b)
        table = {1:
2, 3: f"{a:>{b}}" +
"tail"}
        return total, items, path, with_comment, blank_lines, table
    return None
