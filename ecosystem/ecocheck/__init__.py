"""The modules of the ecosystem check (ecosystem/check.py, its command line and public names)."""
