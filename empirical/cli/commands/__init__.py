"""One module per ``normsat`` subcommand; each exposes ``register(subparsers)``."""
