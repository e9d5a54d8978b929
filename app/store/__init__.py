"""Where secrets live: the OS keyring, and nowhere else in plaintext."""
