# requires: 3.8
# Indentation, comments and line joining where the grammar's external scanner decides layout.
import os; import sys
total = 1 + \
    2
if total and \
   os:
    pass


def f(x):
    y = 1 \
+ 2
    # a comment at the block's indentation
# a comment at column 0 inside the block
        # a comment indented deeper
    z = [
        1,

        # a comment inside brackets
        2,
    ]
    if x: a = 1; b = 2
    else: a = 3; b = 4
    while x: break
    else: pass
    try: pass
    except Exception: pass
    finally: pass
    return y, z, a, b
        # a trailing comment, deeper


class Empty: ...


def stub(): ...


if sys:
    pass
    # a comment before else
else:
    pass
...
