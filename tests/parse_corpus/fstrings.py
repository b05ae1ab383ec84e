# requires: 3.12
# PEP 701 f-strings: the same quotes inside replacement fields, nesting, backslashes, comments and
# line breaks inside fields, nested format specs, `=` debugging, conversions.
name, width, precision, items = "w", 10, 3, {"key": [1, 2]}
a = f"{name}"
b = f"{f"{name}"}"
c = f"{f"{f"{f"{name}"}"}"}"
d = f"{items["key"][0]}"
e = f"{"\n".join(str(i) for i in items["key"])}"
g = f"{3.14159:{width}.{precision}f}"
h = f"{name!r:>{width}}"
i = f"{name = }" f"{width=:>5}" f"{precision=!s}"
j = f"""{
    name  # a comment inside the field
    + "x"
}"""
k = f"{
    width
    * 2
}"
m = f"{{literal braces}} {{{name}}}"
n = rf"\d+{name}\{width}" + Rf"{name}" + fR"{name}" + FR"\{name}"
o = f"{ {"a": 1}["a"] }"
p = f"{(lambda x: x * 2)(width)}"
q = f"{(value := 7)}"
r = f"{width if width > 3 else precision}"
s = f"{name:{f"{width}"}}"
t = f"\N{BULLET} {name} \N{EM DASH}"
u = f'{'single'}' f"{'mixed'}" f'''{"""triple"""}'''
v = f"{width!r:^{precision}}" "plain" f"{name}"
w = f"" f'' f"""""" f''''''


async def fetch():
    return f"{await other()}"


def gen():
    x = f"{(yield)}"
    return x
