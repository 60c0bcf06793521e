"""Modal screens: confirmation and editing."""
