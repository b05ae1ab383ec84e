# requires: 3.9
# Parenthesized context managers and every with target form.
def g(a, b, c):
    with (
        open(a) as fa,
        open(b) as fb,
    ):
        pass
    with (open(a) as only,):
        pass
    with (a, b):
        pass
    with (a, b) as pair:
        pass
    with a as (x, y), b as [z, *rest], c as c.attr, c as c[0]:
        pass
    with (yield):
        pass
    return fa, fb, only, pair, x, y, z, rest


def scopes():
    global counter; global other
    counter = 0

    def inner():
        nonlocal_ = 1
        return nonlocal_

    def closure():
        nonlocal inner, \
            counter_ref
    counter_ref = 1
    return inner, closure
