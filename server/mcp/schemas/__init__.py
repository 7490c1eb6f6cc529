"""The tools' wire format: one pydantic model per result, which is also the tool's declared output
schema, and one function per model that renders a domain value into it. Services return domain
objects; only these modules know the camelCase shapes agents see."""
