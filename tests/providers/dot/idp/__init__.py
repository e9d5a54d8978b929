"""The test project's own app: the login page template and the bootstrap command."""
