"""Identity: bearer tokens (issue, verify, revoke) and the principal a request acts as.

`server/` uses this package only through `auth.principal` and `auth.verifier`; the OAuth 2.1
authorization server and members' passkeys live here too as they arrive.
"""
