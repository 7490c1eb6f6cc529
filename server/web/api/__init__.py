"""The admin REST API under /api/v1: bearer tokens with the `admin` scope, bound to one
organisation; answers are JSON, errors RFC 9457 problem details."""
