"""The agent's door: the IPC server, its listeners, peer checks, and the request service.

It sits above the use cases: a request is decoded here, handed to a use case, and its answer
encoded here. The broker never imports this package.
"""
