"""One module per CLI subcommand (see eagle3lab/app/cli.py)."""
