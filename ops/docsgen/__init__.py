"""The documentation site's generated pages: the CLI reference from the commands' own `--help`
(`cli_page`), the settings page from the settings model (`settings_page`), and the MkDocs hook
that writes them into their pages at build time (`hooks`). Nothing here is part of colabq."""
