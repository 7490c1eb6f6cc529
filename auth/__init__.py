"""Identity: the principal a request acts as, bearer tokens and their scopes, the OAuth 2.1
authorization server (clients, consent, codes, refresh families, revocation, introspection),
members' passkeys and browser sessions, and the rate limits that guard sign-in and the token
endpoints.

It sits below the domains, which take a `Principal` to scope what they read. It imports only the
audit log, jobs, the kit, models, settings and the seller client (for client metadata documents);
its queries live in `auth.repository`. Its HTTP endpoints and pages are entry points in server/web.
"""
