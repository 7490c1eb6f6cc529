"""Identity: bearer tokens (issue, verify, revoke), their scopes, and the principal a request acts as.

It sits below the domains, which take a `Principal` to scope what they read, and above the audit
log, the models and the kit, which are all it imports; its queries live in `auth.repository`.
The OAuth 2.1 authorization server and members' passkeys live here too as they arrive.
"""
