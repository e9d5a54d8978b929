"""The core: identities, their credentials and logins. Qt-free and transport-free.

Each piece of identity state has one owner: ``registry`` (names, remembered settings),
``logins`` (the OIDC session: tokens, provider clients, refresh figures), ``flight`` (the
login in flight and its block), ``broker`` (usage: calls, clusters, last error). Others read
``IdentityStatus`` or call methods that say what they want. It imports no use case and not
the agent's door (app.agent).
"""
