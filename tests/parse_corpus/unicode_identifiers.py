# requires: 3.8
# Non-ASCII identifiers (PEP 3131), including ones NFKC folds, and non-ASCII text elsewhere.
π = 3.14159
naïve = "café"  # a comment with ünïcödé
変数 = π * 2
Σ_total = π + 変数
ℌ = 1
x٣ = 3


class Größe:
    def größe(self, 値):
        return 値


print(Größe().größe(naïve), Σ_total, ℌ, x٣, "zero\u200bwidth")
