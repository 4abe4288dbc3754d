"""Importers that turn external price datasets into catalog instance types (pure: text in,
entries out; the CLI reads and writes the files)."""
