# requires: 3.8
# Walrus everywhere it is allowed, comprehensions of every kind, async comprehensions, await.
def walrus(data, f):
    if (n := len(data)) > 10:
        return n
    while chunk := f.read(4):
        print(chunk)
    kept = [y for x in data if (y := f(x)) is not None]
    first = data[(i := 0)]
    tail = data[(j := 1):]
    total = {(k := key): v for key, v in data.items()}
    seen = {(z := x) for x in data}
    print(f(x := 1), i, j, k, z)
    return kept, first, tail, total, seen


def nested(rows):
    flat = [cell for row in rows if row for cell in row if cell if cell > 1]
    table = {k: {v for v in vs} for k, vs in rows.items()}
    pairs = list((a, b) for a in rows for b in rows)
    lazy = sum(x for x in range(10))
    return flat, table, pairs, lazy


async def asynchronous(source, other):
    a = [x async for x in source()]
    b = {x: y async for x, y in source() if await x}
    c = (await x for x in other)
    d = [await x for x in other]
    e = {await k: await v for k, v in other}
    async with source() as s, other as t:
        pass
    async for item in source():
        print(item)
    return await a ** 2, b, c, d, e, s, t
