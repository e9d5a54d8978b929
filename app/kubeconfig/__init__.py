"""kubectl's kubeconfig, read and changed the way kubectl and client-go do.

``view`` reads the merged KUBECONFIG; ``edit`` plans a change, then runs it again under
client-go's lock on the latest content, with a backup (``backups``) and an atomic write
(``files``). ``setup``, ``migrate`` (kubelogin import) and ``secure`` only build changes;
``records`` remembers them for the undo; ``uses`` maps identities to contexts; ``secrets``
says which values are secrets (redacted diffs, where a backup may go).
"""
