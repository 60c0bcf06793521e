"""Modal screens of the TUI: confirmation before a write and editing an entry; pushed
over the main screen, they return their answer to the action that asked."""
