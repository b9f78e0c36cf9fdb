"""The operator CLI: ``python -m cli`` (see ``cli.main``)."""
