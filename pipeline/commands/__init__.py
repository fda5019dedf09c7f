"""One module per `iws` subcommand; each exposes `register(subparsers)` and keeps imports light."""
