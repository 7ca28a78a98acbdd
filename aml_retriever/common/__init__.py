"""Definitions every layer shares: the exception hierarchy (`errors`) and the table of ranking
signals and retrieval settings (`signals`).

May import: nothing of the package. Every other folder may import it.
"""
