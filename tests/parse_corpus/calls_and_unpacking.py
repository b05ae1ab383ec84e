# requires: 3.11
# Star expressions (PEP 646 included), argument kinds, lambdas, annotations, targets.
def f(a, /, b, *args: int, c=1, d: str = "d", **kwargs: object) -> dict[str, int]:
    return {}


def g(*args: *tuple[int, ...]):
    return args


def h():
    rows = [1, 2]
    return *rows, 3


def y(rows):
    yield *rows, 2
    value = yield
    other = yield from range(3)
    got = (yield)
    return value, other, got


a, b, c, d, e = 1, [2], [3], {"x": 4}, {"y": 5}
f(a, *b, c, *c, d=1, **d, e=2, **e)
f(**{"a": 1}, b=2)
f(x for x in b)
merged = {**d, "b": 1, **e}
both = {*b, *c}
chained = [*b, *c]
first, *rest = b
[head, *tail] = c
(p, q), r = (1, 2), 3
for *init, last in [b]:
    pass
for one, (two, three) in []:
    pass
for item in *b, *c:
    pass
t = b[*c] if False else None
i: int
j: list[int] = []
(k): int = 1
d.attr: int
lam = lambda x=1, *ys, z=(1, 2), **kw: (x, ys, z, kw)
only = lambda *, key: key
pos = lambda a, /, b: a
empty = lambda: (yield)
nested_lambda = lambda: lambda: 0
op = a @ a if False else a
a += 1; a -= 1; a *= 1; a //= 1; a %= 1; a **= 1; a >>= 1; a <<= 1; a &= 1; a ^= 1; a |= 1
x = y = z = 0
cmp = a < b <= c != d == e is not f not in g in h is i if False else None
neg = not a == b
cond = a if b else c if d else e
del (a), [b], e["y"]
