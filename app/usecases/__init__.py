"""What people do with kubetray, Qt-free: the CLI and the app's controller both call these."""
