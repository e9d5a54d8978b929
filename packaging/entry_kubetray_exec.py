"""Entry point of the bundled kubetray-exec (kubectl runs this on every command)."""

from exec_helper.__main__ import run

run()
