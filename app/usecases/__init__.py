"""What people do with kubetray, Qt-free and print-free: each takes its collaborators.

``get_credential`` (one kubetray-exec call) and ``account`` (log in, switch account, log out,
forget, cancel) are run by the agent's service; ``account`` and ``setup_cluster`` by the app's
controller too; ``setup_cluster``, ``import_kubelogin`` and ``secrets`` by the CLI. compose
builds them with the real collaborators; tests pass fakes.
"""
