# requires: 3.8
# String prefixes, escapes, implicit concatenation, triple quotes; every numeric literal form.
raw = r"\d" + R"\w" + rb"\x00".decode() + Br"a".decode() + BR"b".decode() + rB"c".decode()
text = u"unicode" + U"upper" + b"bytes".decode() + B"BYTES".decode()
quotes = 'it\'s' + "say \"hi\"" + r"\"" + r'\''
doc = """a "quoted" ""word"" \""" inside"""
other = '''it's
multi-line'''
joined = ("first "
          'second '
          """third""")
continued = "one \
two"
escapes = "\N{GREEK SMALL LETTER ALPHA}\u00e9\U0001F600\x41\101\t\n\\"
ints = [0, 00, 0_0, 1_000_000, 0x_FF, 0XaB, 0o17, 0O7_7, 0b1010, 0B_1]
floats = [1., .5, 1.5, 1e10, 1E-3, 1_0.0_1e+1_0, 00.5, 09.5, 0e0]
complexes = [1j, 1.5J, 1e5j, 1_0j, .5j]
attrs = [1 .real, 1.0.real, 0x1.real, 1j.imag]
power = 2 ** -1 + - - + ~ -1
