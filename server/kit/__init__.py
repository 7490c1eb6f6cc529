"""Small shared building blocks every domain may import: no domain logic lives here."""
