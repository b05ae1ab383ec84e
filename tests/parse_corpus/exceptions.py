# requires: 3.11
# try/except forms, except* groups, raise from, and exec/print as plain names.
def run(code, ns):
    try:
        exec(code, ns)
    except* ValueError as group:
        print(group.exceptions)
    except* (TypeError, KeyError):
        pass
    try:
        exec(code)
    except (OSError, RuntimeError) as err:
        raise RuntimeError("wrapped") from err
    except Exception:
        raise
    else:
        pass
    finally:
        print >> ns, code
    e = exec
    p = print
    print(*ns, sep="", end="\n", file=None, flush=True)
    exec
    print
    return e, p
