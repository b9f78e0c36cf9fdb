"""The drain: cordon, drain and uncordon one node, as ``kubectl drain`` / ``kubectl uncordon`` would.

``engine.DrainEngine`` runs a command; see its module docstring for the steps and how the package is split.
"""
