# requires: 3.9
# PEP 614 decorators: any expression.
import functools

registry = [functools.wraps, lambda f: f]
flag = True


@registry[1]
@(lambda f: f)
@functools.lru_cache(maxsize=None)
@registry[0](print).__call__
def plain():
    pass


@registry[1] if flag else registry[0]
# a comment between decorators
@(chosen := registry[1])
class Decorated:
    @property
    def value(self):
        return 1

    @value.setter
    def value(self, new):
        pass

    @staticmethod
    @registry[1]
    async def run():
        pass
