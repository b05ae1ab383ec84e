# requires: 3.12
# PEP 695: type aliases, generic functions and classes with bounds and constraints, and `type`
# still usable as a name.
from typing import Callable

type Number = int | float
type Pair[T] = tuple[T, T]
type Bounded[T: (int, str)] = list[T]
type Variadic[*Ts] = tuple[*Ts]
type Params[**P] = Callable[P, int]


def first[T](xs: list[T]) -> T:
    return xs[0]


def bounded[T: int, *Ts, **P](x: T, *args: *Ts) -> T:
    return x


async def waiting[T](x: T) -> T:
    return x


class Box[T](list[T]):
    type Inner = T

    def get[S: (int, str)](self, key: S) -> T:
        type Local = dict[S, T]
        return self[0]


type = "a name"
type(type)
print(type.upper(), type[0])


def takes(type):
    return type
