"""Server-rendered pages for members: sign-in, enrolment, passkeys, connections, the consent page
(in server/web/oauth.py) and a small home page. Each route calls identity services; none queries."""
