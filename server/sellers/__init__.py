"""The seller client: the only code that talks to sellers, who are strangers on the internet."""
