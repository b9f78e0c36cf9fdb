"""The state table: low-level access (``table``) and one module per item kind."""
