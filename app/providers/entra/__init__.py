"""Microsoft Entra ID, as AKS clusters take it: kubetray as a drop-in for Azure kubelogin.

``options`` reads Azure kubelogin's ``get-token`` command line and environment, ``settings``
says which identity that is and refuses the modes kubetray does not serve, ``client`` gets the
tokens through Microsoft's MSAL for Python (imported only when an Entra identity is used),
``tools`` runs ``az``/``azd`` for their modes, ``os_broker`` is the Windows/macOS broker.
"""
