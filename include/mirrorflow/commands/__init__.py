"""`mirrorflow` subcommands, one module per family; each exports COMMANDS (click commands)."""
