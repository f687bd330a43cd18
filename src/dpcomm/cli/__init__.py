"""Command-line interface: argument parsing and printing only."""
