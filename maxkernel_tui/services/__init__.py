"""What the TUI and the CLI share: listing, resolving and exporting sessions, and naming a task.
The screens and the commands both call these; neither imports the other. No jax here."""
