"""The `colab` CLI 0.7.4 as colabq drives it: the typed driver, its output parsers, the verified
stop, and the CLI records an adopter writes."""
