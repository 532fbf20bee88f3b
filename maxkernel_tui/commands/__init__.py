"""The subcommands of `maxkernel-tui`, one module each: `add_parser` and the function it runs."""
