"""One module per `rlplace` subcommand; see `rlplace.cli`."""
