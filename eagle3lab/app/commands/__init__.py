"""One module per CLI subcommand (see eagle3lab/cli.py)."""
