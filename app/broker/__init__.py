"""The broker: identities, credentials, the IPC server. Qt-free; the tray and the agent host it."""
