"""The operators' `runonce` command (docs/operate.md)."""
