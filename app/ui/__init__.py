"""The desktop app (PySide6). The only package that imports Qt; the broker stays Qt-free."""
