"""The spending policy: its model, host patterns, and the pure engine that decides payments."""
