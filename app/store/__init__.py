"""Where secrets live: the OS keyring, or (login tokens only) the agent's memory; never a
plaintext file."""
