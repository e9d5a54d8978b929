"""`kubetray demo`: a demo OpenID provider and a demo API server on 127.0.0.1, for trying kubetray.

Clearly a demo: the provider signs anyone in as demo@kubetray.test after one click (or, in a
terminal with no browser, with any username and password). It is a real OpenID provider all
the same (authlib's server side): authorization code with PKCE S256 required, nonce, signed
id_tokens, rotating refresh tokens.
"""
