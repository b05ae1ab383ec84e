# requires: 3.10
# match statements: every pattern kind, guards, and `match` / `case` still usable as names.
def classify(command, point, Color):
    match command.split():
        case [action]:
            return action
        case ["go", direction] | ["move", direction]:
            return direction
        case ["drop", *objects] if objects:
            return objects
        case {"kind": "click", "pos": (x, y), **rest}:
            return x, y, rest
        case {1: _, "a": [*_]}:
            return None
        case Point(x=0, y=0) | Point(0, 0):
            return "origin"
        case Color.RED | Color.GREEN as shade:
            return shade
        case str() as s if (n := len(s)) > 3:
            return n
        case -1 | 1.5 | -2-3j | 4+5j | "a" "b" | b"raw" | None | True | False:
            return "literal"
        case (first, second, *others):
            return first, second, others
        case [a, [b, c]]:
            return a, b, c
        case a.b.c:
            return "dotted"
        case _:
            return "other"
    match point, command:
        case (1, 2), _:
            pass
    match *point, command:
        case _:
            pass
    match (subject := point):
        case _:
            pass


match = 1
match.attr = 2
match[0] = 3
match(point)
match * 2
match - 1
case = "c"
case.upper()
print(match, case)
